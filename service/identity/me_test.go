package identity_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestMe returns the identity of any valid token.
func TestMe(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Identity Co")
	id, sec := h.Client(ws, m, "leads:write", "apps:read")
	for _, scope := range []string{"", "apps:read"} {
		tok := h.Token(id, sec, scope)
		status, hdr, b := h.Do(http.MethodGet, "/api/v1/me", tok, "", "")
		if status != 200 || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d %q", status, hdr.Get("Content-Type"))
		}
		var me struct {
			Workspace      map[string]string `json:"workspace"`
			App            map[string]string `json:"app"`
			Scopes         []string          `json:"scopes"`
			TokenExpiresAt string            `json:"tokenExpiresAt"`
		}
		if err := json.Unmarshal(b, &me); err != nil {
			t.Fatal(err)
		}
		wantScopes := "leads:write apps:read"
		if scope != "" {
			wantScopes = scope
		}
		if me.Workspace["id"] != ws || me.Workspace["name"] != "Identity Co" || me.App["clientId"] != id ||
			me.App["name"] != "test client" || strings.Join(me.Scopes, " ") != wantScopes || !strings.HasSuffix(me.TokenExpiresAt, "Z") {
			t.Fatalf("me = %s", b)
		}
	}
}
