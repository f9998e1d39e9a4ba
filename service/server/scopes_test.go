package server_test

import (
	"fmt"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestScopeMatrix: every data endpoint under every single-scope token.
func TestScopeMatrix(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Scope Co")
	endpoints := []struct{ method, path, scope, body string }{
		{"GET", "/api/v1/contacts", "contacts:read", ""},
		{"POST", "/api/v1/contacts", "contacts:write", `{"email":"s%d@x.co"}`},
		{"GET", "/api/v1/leads", "leads:read", ""},
		{"POST", "/api/v1/leads", "leads:write", `{"contact":{"email":"l%d@x.co"}}`},
		{"GET", "/api/v1/me", "", ""},
	}
	n := 0
	for _, granted := range []string{"contacts:read", "contacts:write", "leads:read", "leads:write", "apps:read"} {
		id, sec := h.Client(ws, m, granted)
		tok := h.Token(id, sec, "")
		for _, ep := range endpoints {
			n++
			ct, body := "", ""
			if ep.method == "POST" {
				ct, body = "application/json", fmt.Sprintf(ep.body, n)
			}
			status, hdr, b := h.Do(ep.method, ep.path, tok, ct, body)
			allowed := ep.scope == "" || ep.scope == granted
			switch {
			case allowed && status >= 300:
				t.Errorf("%s %s with %s: %d %s", ep.method, ep.path, granted, status, b)
			case !allowed && (status != 403 || hdr.Get("WWW-Authenticate") != `Bearer realm="partner-api", error="insufficient_scope", scope="`+ep.scope+`"`):
				t.Errorf("%s %s with %s: %d %q", ep.method, ep.path, granted, status, hdr.Get("WWW-Authenticate"))
			}
		}
	}
}
