package token_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	identityv1 "github.com/svat/partnerapi/gen/partner/identity/v1"
	"github.com/svat/partnerapi/gen/partner/identity/v1/identityv1connect"
	tokenv1 "github.com/svat/partnerapi/gen/partner/token/v1"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/internal/security/secret"
	"github.com/svat/partnerapi/service/servertest"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

const allScopes = "contacts:read contacts:write leads:read leads:write"

type tokenCase struct {
	name        string
	method      string // default POST
	query       string
	contentType string
	body        string
	basic       string // raw Authorization header
	wantStatus  int
	wantError   string // OAuth error code; "" for success
	wantScope   string
	wantBasic   bool // WWW-Authenticate: Basic realm="partner-api"
	wantHeaders map[string]string
}

func jsonBody(kv ...string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestTokenEndpoint walks every rule of POST /api/oauth/token through real
// HTTP, checking status, body and headers.
func TestTokenEndpoint(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Token Co")
	id, sec := h.Client(ws, m, strings.Fields(allScopes)...)
	narrowID, narrowSec := h.Client(ws, m, "contacts:read")
	inactiveID, inactiveSec := h.Client(ws, m, "contacts:read")
	revokedID, revokedSec := h.Client(ws, m, "contacts:read")
	ctx := context.Background()
	if _, err := h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: inactiveID, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.AdminClient.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: revokedID, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	form := "application/x-www-form-urlencoded"
	js := "application/json"
	ok := func(name, ct, body, basic, scope string) tokenCase {
		return tokenCase{name: name, contentType: ct, body: body, basic: basic, wantStatus: 200, wantScope: scope,
			wantHeaders: map[string]string{"Cache-Control": "no-store", "Pragma": "no-cache"}}
	}
	bad := func(name, ct, body, basic string, status int, code string, challenge bool) tokenCase {
		return tokenCase{name: name, contentType: ct, body: body, basic: basic, wantStatus: status, wantError: code, wantBasic: challenge}
	}
	cases := []tokenCase{
		ok("basic+form", form, "grant_type=client_credentials", servertest.BasicHeader(id, sec), allScopes),
		ok("basic+json", js, jsonBody("grant_type", "client_credentials"), servertest.BasicHeader(id, sec), allScopes),
		ok("body+form", form, url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode(), "", allScopes),
		ok("body+json", js, jsonBody("grant_type", "client_credentials", "client_id", id, "client_secret", sec), "", allScopes),
		ok("form with charset", form+"; charset=UTF-8", "grant_type=client_credentials", servertest.BasicHeader(id, sec), allScopes),
		ok("json with charset", js+"; charset=utf-8", jsonBody("grant_type", "client_credentials"), servertest.BasicHeader(id, sec), allScopes),
		ok("empty scope means all", form, "grant_type=client_credentials&scope=", servertest.BasicHeader(id, sec), allScopes),
		ok("subset scope", form, "grant_type=client_credentials&scope=leads:read+contacts:read", servertest.BasicHeader(id, sec), "contacts:read leads:read"),
		ok("json subset scope", js, jsonBody("grant_type", "client_credentials", "scope", "leads:write"), servertest.BasicHeader(id, sec), "leads:write"),
		ok("unknown parameters ignored", form, "grant_type=client_credentials&audience=x", servertest.BasicHeader(id, sec), allScopes),
		ok("basic with matching body client_id", form, "grant_type=client_credentials&client_id="+id, servertest.BasicHeader(id, sec), allScopes),
		ok("narrow client default scope", form, "grant_type=client_credentials", servertest.BasicHeader(narrowID, narrowSec), "contacts:read"),

		bad("missing grant_type", form, "scope=contacts:read", servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("unsupported grant type", form, "grant_type=password&username=a&password=b", servertest.BasicHeader(id, sec), 400, "unsupported_grant_type", false),
		bad("authorization_code grant", js, jsonBody("grant_type", "authorization_code"), servertest.BasicHeader(id, sec), 400, "unsupported_grant_type", false),
		bad("unknown scope", form, "grant_type=client_credentials&scope=contacts:read+admin", servertest.BasicHeader(id, sec), 400, "invalid_scope", false),
		bad("scope not allowed on client", form, "grant_type=client_credentials&scope=leads:read", servertest.BasicHeader(narrowID, narrowSec), 400, "invalid_scope", false),
		bad("repeated form parameter", form, "grant_type=client_credentials&grant_type=client_credentials", servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("repeated scope parameter", form, "grant_type=client_credentials&scope=a&scope=b", servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("duplicate JSON key", js, `{"grant_type":"client_credentials","grant_type":"client_credentials"}`, servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("non-string JSON value", js, `{"grant_type":"client_credentials","scope":["a"]}`, servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("malformed JSON", js, `{"grant_type":`, servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("unsupported content type", "text/plain", "grant_type=client_credentials", servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("unsupported charset", form+"; charset=latin1", "grant_type=client_credentials", servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("basic and body secret", form, "grant_type=client_credentials&client_id="+id+"&client_secret="+sec, servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("basic and other body client_id", form, "grant_type=client_credentials&client_id="+narrowID, servertest.BasicHeader(id, sec), 400, "invalid_request", false),
		bad("wrong secret basic", form, "grant_type=client_credentials", servertest.BasicHeader(id, sec+"x"), 401, "invalid_client", true),
		bad("wrong secret body", form, url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {"nope"}}.Encode(), "", 401, "invalid_client", true),
		bad("unknown client", form, "grant_type=client_credentials", servertest.BasicHeader("cli_00000000000000000000000000", sec), 401, "invalid_client", true),
		bad("malformed client id", form, "grant_type=client_credentials", servertest.BasicHeader("nobody", sec), 401, "invalid_client", true),
		bad("missing credentials", form, "grant_type=client_credentials", "", 401, "invalid_client", true),
		bad("missing secret", form, "grant_type=client_credentials&client_id="+id, "", 401, "invalid_client", true),
		bad("malformed basic", form, "grant_type=client_credentials", "Basic !!!notbase64", 401, "invalid_client", true),
		bad("basic without colon", form, "grant_type=client_credentials", "Basic "+base64.StdEncoding.EncodeToString([]byte(id)), 401, "invalid_client", true),
		bad("bearer instead of basic", form, "grant_type=client_credentials", "Bearer abc", 401, "invalid_client", true),
		bad("inactive client", form, "grant_type=client_credentials", servertest.BasicHeader(inactiveID, inactiveSec), 401, "invalid_client", true),
		bad("revoked client", form, "grant_type=client_credentials", servertest.BasicHeader(revokedID, revokedSec), 401, "invalid_client", true),
		bad("body over 1 MiB", form, "grant_type=client_credentials&scope="+strings.Repeat("a", 1<<20), servertest.BasicHeader(id, sec), 413, "invalid_request", false),
		{name: "GET on token path", method: http.MethodGet, wantStatus: 405, wantError: "invalid_request", wantHeaders: map[string]string{"Allow": "POST"}},
		{name: "secret in the query string", method: http.MethodPost, query: "?client_secret=" + sec, contentType: form, body: "grant_type=client_credentials",
			basic: servertest.BasicHeader(id, sec), wantStatus: 400, wantError: "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, h.Public.URL+"/api/oauth/token"+tc.query, strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.basic != "" {
				req.Header.Set("Authorization", tc.basic)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body map[string]any
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if res.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %v", res.StatusCode, tc.wantStatus, body)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if res.Header.Get("Request-Id") == "" {
				t.Error("no Request-Id header")
			}
			for k, v := range tc.wantHeaders {
				if got := res.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			gotChallenge := res.Header.Get("WWW-Authenticate")
			if tc.wantBasic && gotChallenge != `Basic realm="partner-api"` {
				t.Errorf("WWW-Authenticate = %q, want the Basic challenge", gotChallenge)
			}
			if tc.wantError != "" {
				if body["error"] != tc.wantError {
					t.Errorf("error = %v, want %q", body["error"], tc.wantError)
				}
				if d, _ := body["error_description"].(string); d == "" {
					t.Error("no error_description")
				}
				if len(body) != 2 {
					t.Errorf("error body has extra members: %v", body)
				}
				return
			}
			tok, _ := body["access_token"].(string)
			if !strings.HasPrefix(tok, "svat_") || !secret.WellFormedToken(tok) {
				t.Errorf("access_token = %q, want a well-formed svat_ token", tok)
			}
			if body["token_type"] != "Bearer" {
				t.Errorf("token_type = %v", body["token_type"])
			}
			if n, ok := body["expires_in"].(float64); !ok || n != 31536000 {
				t.Errorf("expires_in = %#v, want the JSON number 31536000", body["expires_in"])
			}
			if body["scope"] != tc.wantScope {
				t.Errorf("scope = %v, want %q", body["scope"], tc.wantScope)
			}
		})
	}
}

// TestTokenStoreFailure shows a database failure is a 500 server_error with
// nothing internal in the body.
func TestTokenStoreFailure(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Broken")
	id, sec := h.Client(ws, m, "contacts:read")
	h.DB.Close()
	status, hdr, body := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded",
		url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode())
	if status != 500 {
		t.Fatalf("status = %d, want 500; %s", status, body)
	}
	got := servertest.Decode(t, body)
	if got["error"] != "server_error" || strings.Contains(string(body), "pool") || strings.Contains(string(body), "sql") {
		t.Fatalf("body = %s, want a bare server_error", body)
	}
	if hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control = %q", hdr.Get("Cache-Control"))
	}
}

// TestOAuth2Library: golang.org/x/oauth2/clientcredentials gets a token in
// both auth styles and calls GET /api/v1/me with it.
func TestOAuth2Library(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Lib Co")
	id, sec := h.Client(ws, m, "contacts:read", "leads:read")
	for name, style := range map[string]oauth2.AuthStyle{"header": oauth2.AuthStyleInHeader, "params": oauth2.AuthStyleInParams} {
		t.Run(name, func(t *testing.T) {
			cfg := clientcredentials.Config{ClientID: id, ClientSecret: sec, TokenURL: h.Public.URL + "/api/oauth/token",
				Scopes: []string{"leads:read"}, AuthStyle: style}
			tok, err := cfg.Token(context.Background())
			if err != nil {
				t.Fatalf("Token: %v", err)
			}
			if tok.TokenType != "Bearer" || !strings.HasPrefix(tok.AccessToken, "svat_") {
				t.Fatalf("token = %+v", tok)
			}
			if d := time.Until(tok.Expiry); d < 364*24*time.Hour {
				t.Fatalf("expiry in %v, want about 365 days", d)
			}
			res, err := cfg.Client(context.Background()).Get(h.Public.URL + "/api/v1/me")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var me struct {
				Workspace struct{ ID, Name string }
				App       struct{ ClientID, Name string }
				Scopes    []string
			}
			if err := json.NewDecoder(res.Body).Decode(&me); err != nil || res.StatusCode != 200 {
				t.Fatalf("GET /me: %d %v", res.StatusCode, err)
			}
			if me.Workspace.ID != ws || me.App.ClientID != id || len(me.Scopes) != 1 || me.Scopes[0] != "leads:read" {
				t.Fatalf("me = %+v", me)
			}
		})
	}
}

// TestTokenOverRPC: the generated Connect client gets a token over Connect
// and over gRPC with Basic credentials in the Authorization header, and the
// token works on GetMe over the same protocol.
func TestTokenOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("RPC Co")
	id, sec := h.Client(ws, m, "contacts:read")
	protocols := map[string][]connect.ClientOption{
		"connect":  nil,
		"grpc":     {connect.WithGRPC()},
		"grpc-web": {connect.WithGRPCWeb()},
	}
	for name, opts := range protocols {
		t.Run(name, func(t *testing.T) {
			hc := h.HTTP2Client()
			tc := tokenv1connect.NewTokenServiceClient(hc, h.Public.URL, opts...)
			req := connect.NewRequest(&tokenv1.CreateTokenRequest{GrantType: "client_credentials"})
			req.Header().Set("Authorization", servertest.BasicHeader(id, sec))
			res, err := tc.CreateToken(context.Background(), req)
			if err != nil {
				t.Fatalf("CreateToken: %v", err)
			}
			if res.Msg.GetTokenType() != "Bearer" || res.Msg.GetExpiresIn() != 31536000 || res.Msg.GetScope() != "contacts:read" {
				t.Fatalf("response = %v", res.Msg)
			}
			ic := identityv1connect.NewIdentityServiceClient(hc, h.Public.URL, opts...)
			meReq := connect.NewRequest(&identityv1.GetMeRequest{})
			meReq.Header().Set("Authorization", "Bearer "+res.Msg.GetAccessToken())
			me, err := ic.GetMe(context.Background(), meReq)
			if err != nil || me.Msg.GetApp().GetClientId() != id {
				t.Fatalf("GetMe = %v, %v", me, err)
			}

			bad := connect.NewRequest(&tokenv1.CreateTokenRequest{GrantType: "client_credentials"})
			bad.Header().Set("Authorization", servertest.BasicHeader(id, "wrong"))
			_, err = tc.CreateToken(context.Background(), bad)
			servertest.AssertConnectError(t, err, connect.CodeUnauthenticated, "invalid_client")
			bad = connect.NewRequest(&tokenv1.CreateTokenRequest{GrantType: "password"})
			bad.Header().Set("Authorization", servertest.BasicHeader(id, sec))
			_, err = tc.CreateToken(context.Background(), bad)
			servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "unsupported_grant_type")
		})
	}
}

// TestRevoke covers RFC 7009: the caller's token is revoked and refused on
// the next request; another client's token and unknown tokens answer 200
// and change nothing.
func TestRevoke(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Revoke Co")
	id, sec := h.Client(ws, m, "contacts:read")
	otherID, otherSec := h.Client(ws, m, "contacts:read")
	mine := h.Token(id, sec, "")
	theirs := h.Token(otherID, otherSec, "")

	revoke := func(tok, ct string, basic bool, cid, csec string) (int, map[string]any) {
		var body string
		if ct == "application/json" {
			kv := []string{"token", tok, "token_type_hint", "access_token"}
			if !basic {
				kv = append(kv, "client_id", cid, "client_secret", csec)
			}
			body = jsonBody(kv...)
		} else {
			v := url.Values{"token": {tok}}
			if !basic {
				v.Set("client_id", cid)
				v.Set("client_secret", csec)
			}
			body = v.Encode()
		}
		hdr := []string{}
		if basic {
			hdr = []string{"Authorization", servertest.BasicHeader(cid, csec)}
		}
		status, _, b := h.Do(http.MethodPost, "/api/oauth/revoke", "", ct, body, hdr...)
		return status, servertest.Decode(t, b)
	}

	if s, b := revoke(theirs, "application/x-www-form-urlencoded", true, id, sec); s != 200 {
		t.Fatalf("revoking another client's token: %d %v", s, b)
	}
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", theirs, "", ""); s != 200 {
		t.Fatalf("another client's token was revoked: /me = %d", s)
	}
	if s, b := revoke("svat_unknown", "application/json", false, id, sec); s != 200 {
		t.Fatalf("unknown token: %d %v", s, b)
	}
	fake, _ := secret.NewToken()
	if s, b := revoke(fake, "application/json", true, id, sec); s != 200 {
		t.Fatalf("well-formed unknown token: %d %v", s, b)
	}
	if s, b := revoke(mine, "application/x-www-form-urlencoded", false, id, "wrong"); s != 401 || b["error"] != "invalid_client" {
		t.Fatalf("wrong secret: %d %v", s, b)
	}
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", mine, "", ""); s != 200 {
		t.Fatalf("failed revocation revoked the token: /me = %d", s)
	}
	if s, b := revoke("", "application/x-www-form-urlencoded", true, id, sec); s != 400 || b["error"] != "invalid_request" {
		t.Fatalf("missing token: %d %v", s, b)
	}
	if s, b := revoke(mine, "application/json", false, id, sec); s != 200 {
		t.Fatalf("revoke: %d %v", s, b)
	}
	status, hdr, body := h.Do(http.MethodGet, "/api/v1/me", mine, "", "")
	if status != 401 || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("revoked token on /me: %d %q %s", status, hdr.Get("WWW-Authenticate"), body)
	}
}

// TestTokenExpiry uses the injectable clock: a token works until its
// lifetime has passed, then gets 401 invalid_token.
func TestTokenExpiry(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Expiry Co")
	h.Clock.Advance(365*24*time.Hour - time.Minute)
	if s, _, b := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 200 {
		t.Fatalf("a minute before expiry: %d %s", s, b)
	}
	h.Clock.Advance(2 * time.Minute)
	s, hdr, b := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", "")
	if s != 401 || hdr.Get("WWW-Authenticate") != `Bearer realm="partner-api", error="invalid_token"` {
		t.Fatalf("after expiry: %d %q %s", s, hdr.Get("WWW-Authenticate"), b)
	}
}

// TestConcurrentIssuance: tokens issued concurrently (and so inserted in
// shared batches) are each stored, distinct and usable at once.
func TestConcurrentIssuance(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Burst Co")
	id, sec := h.Client(ws, m, "contacts:read")
	const n = 64
	tokens := make([]string, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _, b, err := h.Send(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded",
				url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode())
			if err != nil {
				errs <- err
				return
			}
			var body struct {
				AccessToken string `json:"access_token"`
			}
			if s != 200 || json.Unmarshal(b, &body) != nil {
				errs <- fmt.Errorf("issuance %d: %d %s", i, s, b)
				return
			}
			tokens[i] = body.AccessToken
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tok := range tokens {
		if seen[tok] {
			t.Fatal("a token was issued twice")
		}
		seen[tok] = true
		if s, _, b := h.Do(http.MethodGet, "/api/v1/me", tok, "", ""); s != 200 {
			t.Fatalf("issued token refused: %d %s", s, b)
		}
	}
	var stored int
	if err := dbtest.Raw(t, h.DB).QueryRow(context.Background(), "SELECT count(*) FROM access_tokens").Scan(&stored); err != nil || stored != n {
		t.Fatalf("stored tokens = %d, %v; want %d", stored, err, n)
	}
}
