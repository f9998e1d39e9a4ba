package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeQuickstartOnOtherPorts runs the README quickstart with `bash
// -e`, as the README says, against a server on ports chosen at random:
// with PARTNER_ADMIN_URL, and with only PARTNER_ADMIN_ADDR (the CLI
// derives the URL), it prints the four answers; with an admin URL where
// nothing listens it stops at the first step and says what to set, with
// no usage text and no request sent with "Bearer null" (issue 24, item
// 1). Before, the block had no pipefail, so it carried on past the
// failing CLI into four curls without a token.
func TestReadmeQuickstartOnOtherPorts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (make deps installs it)", tool)
		}
	}
	bin := buildBinary(t)
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(work, "bin", "partnerapi")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(work, "quickstart.sh")
	if err := os.WriteFile(script, []byte(quickstart(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir, err := os.MkdirTemp("", "partnerapi-ports-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	d := startServe(t, bin, dataDir, "")

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := closed.Addr().String()
	_ = closed.Close() // nothing listens there now

	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PARTNER_") && !strings.HasPrefix(kv, "BASE_URL=") {
			env = append(env, kv)
		}
	}
	run := func(extra ...string) (string, error) {
		cmd := exec.Command("bash", "-e", script)
		cmd.Dir = work
		cmd.Env = append(append(append([]string{}, env...), "BASE_URL=http://"+d.public), extra...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	for name, extra := range map[string][]string{
		"PARTNER_ADMIN_URL":  {"PARTNER_ADMIN_URL=http://" + d.admin},
		"PARTNER_ADMIN_ADDR": {"PARTNER_ADMIN_ADDR=" + d.admin},
	} {
		out, err := run(extra...)
		if err != nil {
			t.Fatalf("%s: quickstart failed: %v\n%s", name, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.Contains(lines[0], `"workspace"`) || !strings.Contains(lines[3], `"contacts"`) {
			t.Fatalf("%s: quickstart printed:\n%s\nwant the four answers", name, out)
		}
	}

	out, err := run("PARTNER_ADMIN_URL=http://" + nobody)
	if err == nil {
		t.Fatalf("quickstart with no admin listener succeeded:\n%s", out)
	}
	if !strings.Contains(out, "cannot reach the admin API at http://"+nobody) || !strings.Contains(out, "PARTNER_ADMIN_URL") {
		t.Errorf("quickstart with no admin listener: %q; want the URL it tried and what to set", out)
	}
	if strings.Contains(out, "usage:") || strings.Contains(out, "{") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("quickstart went on past the failing step:\n%s", out)
	}
}
