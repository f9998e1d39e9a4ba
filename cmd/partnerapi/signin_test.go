package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSignInLinkCommand: `member sign-in-link` prints {"url","expiresAt"}
// for the member; the link signs a browser in to /settings/ on the admin
// listener (PARTNER_SETTINGS_URL unset), once; --ttl past 5m is refused.
func TestSignInLinkCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dataDir, err := os.MkdirTemp("", "partnerapi-signin-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	d := startServe(t, bin, dataDir, "")
	ws := cli(t, bin, d, "", "workspace", "create", "--name", "Links")["id"].(string)
	m := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "links@example.com", "--settings-access")["id"].(string)
	out := cli(t, bin, d, "", "member", "sign-in-link", "--member", m, "--ttl", "60s")
	link, _ := out["url"].(string)
	if !strings.HasPrefix(link, "http://"+d.admin+"/settings/sign-in?code=") || len(out) != 2 {
		t.Fatalf("sign-in-link printed %v, want url on the admin listener and expiresAt", out)
	}
	expires, err := time.Parse(time.RFC3339Nano, out["expiresAt"].(string))
	if err != nil || time.Until(expires) > 61*time.Second || time.Until(expires) < 30*time.Second {
		t.Fatalf("expiresAt %v (%v), want in 60s", out["expiresAt"], err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, want := range []int{http.StatusSeeOther, http.StatusBadRequest} {
		res, err := noRedirect.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want || (i == 0) != (len(res.Cookies()) == 1) {
			t.Fatalf("opening the link, time %d: status %d, cookies %v; want %d", i+1, res.StatusCode, res.Header["Set-Cookie"], want)
		}
	}
	if msg := cliFails(t, bin, d, "", "member", "sign-in-link", "--member", m, "--ttl", "10m"); !strings.Contains(msg, "ttl") {
		t.Fatalf("--ttl 10m: %q, want a refusal naming ttl", msg)
	}
}
