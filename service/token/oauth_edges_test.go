package token_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// oauthDescriptionOK reports whether s uses only the characters RFC 6749
// §5.2 allows in error_description: %x20-21 / %x23-5B / %x5D-7E (printable
// ASCII without '"' and '\').
func oauthDescriptionOK(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// TestOAuthErrorDescriptionCharset: every error_description of the token
// and revocation endpoints keeps to the characters RFC 6749 §5.2 allows,
// including when it names what the caller sent (an unknown scope, a
// repeated parameter, a Content-Type, a path), which once came back
// quoted with '"', escaped with '\' or as raw UTF-8.
func TestOAuthErrorDescriptionCharset(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Charset Co")
	basic := servertest.BasicHeader(tn.ClientID, tn.ClientSecret)
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name, path, ct, body string
		status               int
		code                 string
	}{
		{"unknown scope", "/api/oauth/token", form, "grant_type=client_credentials&scope=admin", 400, "invalid_scope"},
		{"scope with a tab", "/api/oauth/token", form, "grant_type=client_credentials&scope=" + url.QueryEscape("leads:read\tcontacts:read"), 400, "invalid_scope"},
		{"non-ASCII scope", "/api/oauth/token", form, "grant_type=client_credentials&scope=" + url.QueryEscape("contacts:réad"), 400, "invalid_scope"},
		{"scope with a quote and backslash", "/api/oauth/token", form, "grant_type=client_credentials&scope=" + url.QueryEscape(`a"b\c`), 400, "invalid_scope"},
		{"repeated parameter", "/api/oauth/token", form, "grant_type=client_credentials&scope=a&scope=b", 400, "invalid_request"},
		{"non-string JSON parameter", "/api/oauth/token", "application/json", `{"grant_type":"client_credentials","scope":1}`, 400, "invalid_request"},
		{"unsupported content type", "/api/oauth/token", "text/plain", "grant_type=client_credentials", 400, "invalid_request"},
		{"unsupported charset", "/api/oauth/revoke", form + "; charset=latin1", "token=x", 400, "invalid_request"},
		{"query parameter", "/api/oauth/token?x%22y=1", form, "grant_type=client_credentials", 400, "invalid_request"},
		{"unknown path", "/api/oauth/t%22%5C%C3%A9", form, "grant_type=client_credentials", 404, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, hdr, b := h.Do(http.MethodPost, tc.path, "", tc.ct, tc.body, "Authorization", basic)
			var body map[string]string
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("%d %s: %v", s, b, err)
			}
			if s != tc.status || body["error"] != tc.code || hdr.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d %q %s, want %d %s", s, hdr.Get("Cache-Control"), b, tc.status, tc.code)
			}
			if d := body["error_description"]; d == "" || !oauthDescriptionOK(d) {
				t.Errorf("error_description %q has characters RFC 6749 §5.2 forbids", d)
			}
		})
	}
}

// TestBlankScopeIsInvalidScope: a scope of only spaces is no scope-token
// at all (RFC 6749 §3.3), an invalid_scope that says so; it was answered
// "the client has no scopes", sending the partner to check a client that
// is fine. Omitted or empty, scope still means every scope of the client.
func TestBlankScopeIsInvalidScope(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Blank Scope Co")
	basic := servertest.BasicHeader(tn.ClientID, tn.ClientSecret)
	form := "application/x-www-form-urlencoded"
	s, _, b := h.Do(http.MethodPost, "/api/oauth/token", "", form, "grant_type=client_credentials&scope=+++", "Authorization", basic)
	var body map[string]string
	servertest.MustUnmarshal(t, b, &body)
	if s != 400 || body["error"] != "invalid_scope" || body["error_description"] != "scope names no scope; omit it to get every scope of the client" {
		t.Fatalf("blank scope: %d %s", s, b)
	}
	s, _, b = h.Do(http.MethodPost, "/api/oauth/token", "", form, "grant_type=client_credentials&scope=", "Authorization", basic)
	if s != 200 || servertest.Decode(t, b)["scope"] != "contacts:read contacts:write leads:read leads:write apps:read" {
		t.Fatalf("empty scope: %d %s", s, b)
	}
}
