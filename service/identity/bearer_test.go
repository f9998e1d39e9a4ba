package identity_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/internal/security/secret"
	"github.com/svat/partnerapi/service/servertest"
)

// TestBearerAuthentication covers RFC 6750 §3 on /api/v1 over REST.
func TestBearerAuthentication(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Bearer Co")
	ws, m := tn.WorkspaceID, tn.MemberID
	readOnlyID, readOnlySec := h.Client(ws, m, "contacts:read")
	readOnly := h.Token(readOnlyID, readOnlySec, "")
	unknown, _ := secret.NewToken()
	swapped := "x"
	if strings.HasSuffix(tn.Token, "x") {
		swapped = "y"
	}

	cases := []struct {
		name, method, path, auth string
		wantStatus               int
		wantCode, wantChallenge  string
	}{
		{"no header", "GET", "/api/v1/me", "", 401, "unauthenticated", `Bearer realm="partner-api"`},
		{"basic scheme", "GET", "/api/v1/contacts", "Basic Zm9vOmJhcg==", 401, "unauthenticated", `Bearer realm="partner-api"`},
		{"empty bearer", "GET", "/api/v1/me", "Bearer ", 401, "unauthenticated", `Bearer realm="partner-api"`},
		{"garbage token", "GET", "/api/v1/me", "Bearer nope", 401, "invalid_token", `Bearer realm="partner-api", error="invalid_token"`},
		{"bad checksum", "GET", "/api/v1/me", "Bearer " + tn.Token[:len(tn.Token)-1] + swapped, 401, "invalid_token", `Bearer realm="partner-api", error="invalid_token"`},
		{"unknown token", "GET", "/api/v1/leads", "Bearer " + unknown, 401, "invalid_token", `Bearer realm="partner-api", error="invalid_token"`},
		{"missing scope on list", "GET", "/api/v1/leads", "Bearer " + readOnly, 403, "insufficient_scope", `Bearer realm="partner-api", error="insufficient_scope", scope="leads:read"`},
		{"missing scope on create", "POST", "/api/v1/contacts", "Bearer " + readOnly, 403, "insufficient_scope", `Bearer realm="partner-api", error="insufficient_scope", scope="contacts:write"`},
		{"lower-case scheme", "GET", "/api/v1/me", "bearer " + tn.Token, 200, "", ""},
		{"me needs no scope", "GET", "/api/v1/me", "Bearer " + readOnly, 200, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ct := ""
			body := ""
			if tc.method == "POST" {
				ct, body = "application/json", `{"email":"a@b.co"}`
			}
			status, hdr, b := h.Do(tc.method, tc.path, "", ct, body, "Authorization", tc.auth)
			if status != tc.wantStatus {
				t.Fatalf("status = %d, want %d: %s", status, tc.wantStatus, b)
			}
			if got := hdr.Get("WWW-Authenticate"); got != tc.wantChallenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tc.wantChallenge)
			}
			if tc.wantCode == "" {
				return
			}
			if ct := hdr.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q", ct)
			}
			p := servertest.Decode(t, b)
			if p["code"] != tc.wantCode || p["status"] != float64(tc.wantStatus) || p["requestId"] != hdr.Get("Request-Id") || p["requestId"] == "" {
				t.Errorf("problem = %v", p)
			}
			for _, k := range []string{"type", "title", "detail", "errors"} {
				if _, ok := p[k]; !ok {
					t.Errorf("problem has no %q", k)
				}
			}
		})
	}
}

// TestTokenInQueryRefused: a token is accepted only in the header.
func TestTokenInQueryRefused(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Query Co")
	for _, auth := range []string{"", "Bearer " + tn.Token} {
		status, hdr, b := h.Do(http.MethodGet, "/api/v1/contacts?access_token="+tn.Token, "", "", "", "Authorization", auth)
		if status != 400 || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_request"`) {
			t.Fatalf("auth %q: %d %q %s", auth, status, hdr.Get("WWW-Authenticate"), b)
		}
		if strings.Contains(string(b), tn.Token) {
			t.Fatal("the error echoes the token")
		}
	}
}

// TestBadChecksumNeverReachesTheDatabase counts store lookups.
func TestBadChecksumNeverReachesTheDatabase(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Checksum Co")
	forged := tn.Token[:10] + strings.Repeat("A", len(tn.Token)-10)
	before := h.Lookups.Calls.Load()
	for range 20 {
		if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", forged, "", ""); s != 401 {
			t.Fatalf("forged token: %d", s)
		}
	}
	if n := h.Lookups.Calls.Load() - before; n != 0 {
		t.Fatalf("checksum-invalid tokens caused %d store lookups, want 0", n)
	}
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 200 {
		t.Fatalf("valid token: %d", s)
	}
	if h.Lookups.Calls.Load() == before {
		t.Fatal("the counter does not count: a valid token did not reach the store")
	}
}

// TestBearerOverRPC: the same rules over Connect and gRPC.
func TestBearerOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Bearer Co")
	roID, roSec := h.Client(tn.WorkspaceID, tn.MemberID, "contacts:read")
	ro := h.Token(roID, roSec, "")
	for name, opts := range map[string][]connect.ClientOption{"connect": nil, "grpc": {connect.WithGRPC()}, "grpc-web": {connect.WithGRPCWeb()}} {
		t.Run(name, func(t *testing.T) {
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, opts...)
			_, err := c.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{}))
			ce := servertest.AssertConnectError(t, err, connect.CodeUnauthenticated, "unauthenticated")
			// gRPC has no HTTP challenge; ErrorInfo carries the reason there.
			if got := ce.Meta().Get("WWW-Authenticate"); name != "grpc" && got != `Bearer realm="partner-api"` {
				t.Errorf("challenge = %q", got)
			}
			req := connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: servertest.Ptr("x@y.co")}})
			req.Header().Set("Authorization", "Bearer "+ro)
			_, err = c.CreateContact(context.Background(), req)
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "insufficient_scope")
			req2 := connect.NewRequest(&contactv1.ListContactsRequest{})
			req2.Header().Set("Authorization", "Bearer svat_forged")
			_, err = c.ListContacts(context.Background(), req2)
			servertest.AssertConnectError(t, err, connect.CodeUnauthenticated, "invalid_token")
		})
	}
}
