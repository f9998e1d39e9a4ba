package gate_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	tokenv1 "github.com/svat/partnerapi/gen/partner/token/v1"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/edge/gate"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/internal/security/secret"
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

// fixture is a gate in front of a handler that records the principal it
// was handed, over real HTTP.
type fixture struct {
	srv     *httptest.Server
	db      *db.DB
	reached atomic.Int32
	// principal is the client id the last request reached next with.
	principal atomic.Value
}

func newFixture(t *testing.T, cfg ratelimit.Config) *fixture {
	t.Helper()
	reqs, err := auth.Requirements(contactv1.File_partner_contact_v1_contact_proto.Services().Get(0),
		tokenv1.File_partner_token_v1_token_proto.Services().Get(0))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: dbtest.New(t)}
	g := &gate.Gate{
		Authn:  &auth.Authenticator{Store: auth.DBStore{DB: f.db}},
		Limits: ratelimit.New(cfg),
		Reqs:   reqs,
		Classify: func(_ context.Context, err error) *apierror.Error {
			return &apierror.Error{Code: apierror.CodeUnavailable, Message: "the database is unavailable; retry later", RetryAfter: "1", Cause: err}
		},
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.reached.Add(1)
		if p := auth.FromContext(r.Context()); p != nil {
			f.principal.Store(p.ClientID.String())
		}
		w.WriteHeader(http.StatusNoContent)
	})
	f.srv = httptest.NewServer(requestid.Middleware(g.RPC(next)))
	t.Cleanup(f.srv.Close)
	return f
}

// token stores a valid token of a new client with the given scopes in
// the database, as the token endpoint would.
func (f *fixture) token(t *testing.T, scopes ...string) (string, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	tok, hash := secret.NewToken()
	ws, member, client := uuid.New(), uuid.New(), uuid.New()
	err := f.db.WithTx(ctx, func(tx db.DBTX) error {
		if _, err := db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: ws, Name: "Gate Co"}); err != nil {
			return err
		}
		if _, err := db.Q.MemberCreate(ctx, tx, dbsqlc.MemberCreateParams{WorkspaceID: ws, ID: member, Email: "m@gate.test", Approved: true, SettingsAccess: true}); err != nil {
			return err
		}
		_, secretHash := secret.NewClientSecret()
		c, err := db.Q.APIClientCreate(ctx, tx, dbsqlc.APIClientCreateParams{WorkspaceID: ws, ID: client, Name: "c",
			SecretHash: secretHash[:], Scopes: scopes, RedirectUris: []string{}, CreatedBy: member})
		if err != nil {
			return err
		}
		return db.Q.AccessTokenCreate(ctx, tx, dbsqlc.AccessTokenCreateParams{TokenHash: hash[:], WorkspaceID: ws, ClientID: client,
			Scopes: scopes, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), SecretGeneration: c.SecretGeneration})
	})
	if err != nil {
		t.Fatalf("store a token: %v", err)
	}
	return tok, client
}

func (f *fixture) send(t *testing.T, path, contentType string, headers ...string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(`{}`))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	return res, body
}

const connectJSON = "application/json"

// TestGateRefusesBeforeTheHandler: a data RPC without a token, with two
// Authorization headers, with a token that is not valid or that lacks the
// scope is refused in the caller's protocol (here Connect) with the
// challenge, and never reaches the handler; a valid token does, with its
// principal and the RateLimit headers.
func TestGateRefusesBeforeTheHandler(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ratelimit.DefaultConfig())
	readToken, readClient := f.token(t, "contacts:read")
	list := contactv1connect.ContactServiceListContactsProcedure
	create := contactv1connect.ContactServiceCreateContactProcedure
	for _, tc := range []struct {
		name, path string
		headers    []string
		status     int
		code       string // the Connect error code
		challenge  string
		rateLimit  bool
	}{
		{"no token", list, nil, 401, "unauthenticated", `Bearer realm="partner-api"`, false},
		{"two Authorization headers", list, []string{"Authorization", "Bearer " + readToken, "Authorization", "Bearer x"}, 400, "invalid_argument",
			`Bearer realm="partner-api", error="invalid_request"`, false},
		{"unknown token", list, []string{"Authorization", "Bearer svat_unknown"}, 401, "unauthenticated",
			`Bearer realm="partner-api", error="invalid_token"`, false},
		{"missing scope", create, []string{"Authorization", "Bearer " + readToken}, 403, "permission_denied",
			`Bearer realm="partner-api", error="insufficient_scope", scope="contacts:write"`, true},
	} {
		res, body := f.send(t, tc.path, connectJSON, tc.headers...)
		if res.StatusCode != tc.status || body["code"] != tc.code || res.Header.Get("WWW-Authenticate") != tc.challenge {
			t.Errorf("%s: %d %v, WWW-Authenticate %q; want %d %s %q", tc.name, res.StatusCode, body, res.Header.Get("WWW-Authenticate"), tc.status, tc.code, tc.challenge)
		}
		if got := res.Header.Get(ratelimit.RateLimitHeader) != ""; got != tc.rateLimit {
			t.Errorf("%s: RateLimit header present %v, want %v", tc.name, got, tc.rateLimit)
		}
	}
	if n := f.reached.Load(); n != 0 {
		t.Fatalf("%d refused requests reached the handler", n)
	}
	res, _ := f.send(t, list, connectJSON, "Authorization", "Bearer "+readToken)
	if res.StatusCode != http.StatusNoContent || f.reached.Load() != 1 || f.principal.Load() != readClient.String() {
		t.Fatalf("valid token: %d, reached %d times as %v", res.StatusCode, f.reached.Load(), f.principal.Load())
	}
	if res.Header.Get(ratelimit.RateLimitHeader) == "" || res.Header.Get(ratelimit.PolicyHeader) == "" {
		t.Fatalf("valid token: no RateLimit headers: %v", res.Header)
	}
}

// TestGateRateLimit: the client's read bucket refuses the request past
// its burst with 429, Retry-After and the RateLimit headers, before the
// handler.
func TestGateRateLimit(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	f := newFixture(t, ratelimit.Config{Read: 1, Write: 1, Now: func() time.Time { return now }})
	tok, _ := f.token(t, "contacts:read")
	list := contactv1connect.ContactServiceListContactsProcedure
	var last *http.Response
	var body map[string]any
	for range 3 { // the burst is twice the rate
		last, body = f.send(t, list, connectJSON, "Authorization", "Bearer "+tok)
	}
	if last.StatusCode != http.StatusTooManyRequests || body["code"] != "resource_exhausted" ||
		last.Header.Get("Retry-After") == "" || last.Header.Get(ratelimit.RateLimitHeader) == "" {
		t.Fatalf("past the burst: %d %v %v", last.StatusCode, body, last.Header)
	}
	if n := f.reached.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2", n)
	}
}

// TestGateTokenEndpoint: the token endpoint needs one Authorization and
// one Content-Type header; it is refused with RFC 6749's invalid_request
// before its body is read.
func TestGateTokenEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ratelimit.DefaultConfig())
	path := tokenv1connect.TokenServiceCreateTokenProcedure
	res, body := f.send(t, path, connectJSON, "Content-Type", "application/json")
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body["message"].(string), "exactly one Content-Type") {
		t.Fatalf("two Content-Types: %d %v", res.StatusCode, body)
	}
	res, body = f.send(t, path, connectJSON, "Authorization", "Basic a", "Authorization", "Basic b")
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body["message"].(string), "exactly one Authorization") {
		t.Fatalf("two Authorizations: %d %v", res.StatusCode, body)
	}
	if res, _ := f.send(t, path, connectJSON); res.StatusCode != http.StatusNoContent {
		t.Fatalf("one of each: %d", res.StatusCode)
	}
	if n := f.reached.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
}

// TestGateStoreFailure: a token store that fails (its database is gone)
// is classified (here a 503 with Retry-After), not answered as a bad
// token.
func TestGateStoreFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ratelimit.DefaultConfig())
	tok, _ := f.token(t, "contacts:read")
	f.db.Close() // the database is gone
	res, body := f.send(t, contactv1connect.ContactServiceListContactsProcedure, connectJSON, "Authorization", "Bearer "+tok)
	if res.StatusCode != http.StatusServiceUnavailable || body["code"] != "unavailable" || res.Header.Get("Retry-After") != "1" || f.reached.Load() != 0 {
		t.Fatalf("store down: %d %v %v", res.StatusCode, body, res.Header)
	}
}

// TestGateNeedsHTTP2: gRPC over HTTP/1 is the caller's 400, not the
// frameworks' 505, and a bidirectional stream over HTTP/1 too.
func TestGateNeedsHTTP2(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ratelimit.DefaultConfig())
	res, _ := f.send(t, contactv1connect.ContactServiceListContactsProcedure, "application/grpc")
	if res.StatusCode == http.StatusHTTPVersionNotSupported || res.StatusCode >= 500 || f.reached.Load() != 0 {
		t.Fatalf("gRPC over HTTP/1: %d", res.StatusCode)
	}
	streams := httptest.NewServer(gate.Streams(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	defer streams.Close()
	sres, err := http.Post(streams.URL+"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(sres.Body)
	sres.Body.Close()
	if sres.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "needs HTTP/2") {
		t.Fatalf("stream over HTTP/1: %d %s", sres.StatusCode, b)
	}
}

// TestWriteErrorSurfaces: a refusal is written in the surface of its
// path: problem+json on /api/v1, RFC 6749 JSON (no-store) on /api/oauth,
// with the error's headers.
func TestWriteErrorSurfaces(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(requestid.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gate.WriteError(w, r, &apierror.Error{Code: apierror.CodeRateLimited, Message: "slow down", RetryAfter: "3"})
	})))
	defer srv.Close()
	for _, tc := range []struct{ path, contentType, body string }{
		{"/api/v1/contacts", "application/problem+json", `"type":"urn:partner-api:problem:rate_limited"`},
		{"/api/oauth/token", "application/json", `{"error":"rate_limited","error_description":"slow down"}`},
	} {
		res, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 429 || res.Header.Get("Content-Type") != tc.contentType || res.Header.Get("Retry-After") != "3" ||
			!strings.Contains(string(b), tc.body) {
			t.Errorf("%s: %d %v %s", tc.path, res.StatusCode, res.Header, b)
		}
	}
}
