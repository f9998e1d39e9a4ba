package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBufCurlAsDocumented runs docs/api.md's buf curl block as written,
// after `make bin/buf`, against a real server: reflection lists the
// methods, and GetMe over Connect and ListLeads over gRPC answer (issue
// 24, item 3). Before, the docs said `buf curl`, which is on no PATH here.
func TestBufCurlAsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("builds buf and runs the binary")
	}
	t.Parallel()
	if out, err := exec.Command("make", "-s", "-C", "../..", "bin/buf").CombinedOutput(); err != nil {
		t.Fatalf("make bin/buf: %v\n%s", err, out)
	}
	bin := buildBinary(t)
	d := startServe(t, bin, t.TempDir(), "")
	ws := cli(t, bin, d, "", "workspace", "create", "--name", "Buf")["id"].(string)
	m := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "buf@example.com", "--settings-access")["id"].(string)
	c := cli(t, bin, d, "", "client", "create", "--workspace", ws, "--member", m, "--name", "buf", "--scopes", "leads:read")
	status, tok := token(t, d, c["clientId"].(string), c["clientSecret"].(string))
	if status != 200 {
		t.Fatalf("token: %d", status)
	}

	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", markdownBlock(t, "../../docs/api.md", "sh", "buf curl --list-methods"))
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "BASE_URL=http://"+d.public, "TOKEN="+tok)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("buf curl block failed: %v\n%s", err, out)
	}
	for _, want := range []string{"partner.identity.v1.IdentityService/GetMe", `"workspace"`, `"pagination"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("buf curl output lacks %s:\n%s", want, out)
		}
	}
}
