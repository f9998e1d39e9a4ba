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
	bin := buildBinary(t)
	run := quickstartScript(t, bin)
	d := startServe(t, bin, serveDataDir(t), "")

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := closed.Addr().String()
	_ = closed.Close() // nothing listens there now

	for name, extra := range map[string][]string{
		"PARTNER_ADMIN_URL":  {"PARTNER_ADMIN_URL=http://" + d.admin},
		"PARTNER_ADMIN_ADDR": {"PARTNER_ADMIN_ADDR=" + d.admin},
	} {
		out, err := run(append([]string{"BASE_URL=http://" + d.public}, extra...)...)
		if err != nil {
			t.Fatalf("%s: quickstart failed: %v\n%s", name, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.Contains(lines[0], `"workspace"`) || !strings.Contains(lines[3], `"contacts"`) {
			t.Fatalf("%s: quickstart printed:\n%s\nwant the four answers", name, out)
		}
	}

	out, err := run("BASE_URL=http://"+d.public, "PARTNER_ADMIN_URL=http://"+nobody)
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

// quickstartScript saves the README quickstart as quickstart.sh beside a
// bin/partnerapi, and returns a func that runs it with `bash -e`, as the
// README says, in an environment without PARTNER_* and BASE_URL but for
// env.
func quickstartScript(t *testing.T, bin string) func(env ...string) (string, error) {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (make deps installs it)", tool)
		}
	}
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
	var clean []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PARTNER_") && !strings.HasPrefix(kv, "BASE_URL=") {
			clean = append(clean, kv)
		}
	}
	return func(env ...string) (string, error) {
		cmd := exec.Command("bash", "-e", script)
		cmd.Dir = work
		cmd.Env = append(append([]string{}, clean...), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// serveDataDir is a data directory for startServe, removed at the end.
func serveDataDir(t *testing.T) string {
	t.Helper()
	dataDir, err := os.MkdirTemp("", "partnerapi-ports-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	return dataDir
}

// TestReadmeQuickstartWithTheWrongBaseURL runs the README quickstart with
// two servers up, A and B, and BASE_URL naming B where the admin API
// reached is A's (issue 36, item 1). Before, with the default server up,
// `BASE_URL=http://localhost:18080 bash -e quickstart.sh` created "Acme"
// on the default server through the CLI's default admin URL, turned the
// refused token request into the token "null" (jq -r) and exited 0 after
// four 401s. Now:
//   - an admin URL the CLI derives (serve's default pair, or this shell's
//     PARTNER_ADMIN_ADDR and PARTNER_HTTP_ADDR) for another server than
//     BASE_URL's is refused at the first step, before any request: nothing
//     is created on either server;
//   - with an admin URL given outright (PARTNER_ADMIN_URL, A's), the CLI
//     obeys, and the script stops at the token request B refuses (curl
//     --fail-with-body, jq -e): no call with "Bearer null", nothing on B;
//   - BASE_URL of the server PARTNER_ADMIN_ADDR and PARTNER_HTTP_ADDR name
//     works end to end.
func TestReadmeQuickstartWithTheWrongBaseURL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	run := quickstartScript(t, bin)
	a := startServe(t, bin, serveDataDir(t), "")
	b := startServe(t, bin, serveDataDir(t), "")
	workspaces := func(d *daemon) int {
		t.Helper()
		return len(cli(t, bin, d, "", "workspace", "list")["workspaces"].([]any))
	}
	// stoppedAtFirstStep: the script failed, and printed one line (the
	// first step's message) containing every one of want.
	stoppedAtFirstStep := func(name, out string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: the quickstart succeeded:\n%s", name, out)
		}
		if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 || strings.Contains(out, "{") {
			t.Errorf("%s: the quickstart went on past its first step:\n%s", name, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q, want it to say %q", name, out, w)
			}
		}
	}

	out, err := run("BASE_URL=http://"+b.public, "PARTNER_ADMIN_ADDR="+a.admin, "PARTNER_HTTP_ADDR="+a.public)
	stoppedAtFirstStep("PARTNER_ADMIN_ADDR of A", out, err, "BASE_URL http://"+b.public+" names another port than the public listener ("+a.public+")",
		"http://"+a.admin, "set PARTNER_ADMIN_URL")
	// The case: serve's defaults guessed, BASE_URL elsewhere. The
	// refusal comes before any request, so it holds whether or not a
	// server listens on 127.0.0.1:8081.
	out, err = run("BASE_URL=http://localhost:" + b.public[strings.LastIndex(b.public, ":")+1:])
	stoppedAtFirstStep("no admin URL", out, err, "names another port than the public listener (:8080)", "(http://127.0.0.1:8081)", "set PARTNER_ADMIN_URL")
	if na, nb := workspaces(a), workspaces(b); na != 0 || nb != 0 {
		t.Fatalf("a refused quickstart created workspaces: %d on A, %d on B", na, nb)
	}

	out, err = run("BASE_URL=http://"+b.public, "PARTNER_ADMIN_URL=http://"+a.admin)
	if err == nil {
		t.Fatalf("PARTNER_ADMIN_URL of A: the quickstart succeeded:\n%s", out)
	}
	if !strings.Contains(out, "error: 401") || strings.Contains(out, `"workspace"`) || strings.Contains(out, "{") {
		t.Errorf("PARTNER_ADMIN_URL of A: %q, want it stopped at the token request B refuses (401), before any API call", out)
	}
	if na, nb := workspaces(a), workspaces(b); na != 1 || nb != 0 {
		t.Errorf("after the token step failed: %d workspaces on A, %d on B; want A's one, the admin URL given", na, nb)
	}

	out, err = run("BASE_URL=http://"+a.public, "PARTNER_ADMIN_ADDR="+a.admin, "PARTNER_HTTP_ADDR="+a.public)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(lines) != 4 || !strings.Contains(lines[0], `"workspace"`) {
		t.Fatalf("the right BASE_URL: %v\n%s", err, out)
	}
}

// TestAdminGuessMatchesBaseURL: which BASE_URL goes with an admin URL the
// CLI derived from serve's settings (checkAdminGuess).
func TestAdminGuessMatchesBaseURL(t *testing.T) {
	t.Parallel()
	const guess = "http://127.0.0.1:8081"
	for _, tc := range []struct {
		base, adminAddr, httpAddr string
		ok                        bool
	}{
		{"", "", "", true},
		{"http://localhost:8080", "", "", true},
		{"http://127.0.0.1:8080/", "", "", true},
		{"http://[::1]:8080", "", "", true},
		{"http://localhost:18080", "", "", false},
		{"http://localhost", "", "", false},
		{"https://api.example.com", "", "", false},
		{"http://10.0.0.5:8080", "", "", false},
		{"localhost:8080", "", "", false},
		{"http://localhost:9090", "127.0.0.1:9091", ":9090", true},
		{"http://10.0.0.5:9090", "10.0.0.5:9091", "10.0.0.5:9090", true},
		{"http://localhost:8080", "127.0.0.1:9091", ":9090", false},
		// PARTNER_ADMIN_ADDR alone: the public listener is not known.
		{"http://localhost:18080", "127.0.0.1:9091", "", true},
	} {
		err := checkAdminGuess(guess, tc.base, tc.adminAddr, tc.httpAddr)
		if (err == nil) != tc.ok {
			t.Errorf("BASE_URL %q, PARTNER_ADMIN_ADDR %q, PARTNER_HTTP_ADDR %q: %v, want ok %v", tc.base, tc.adminAddr, tc.httpAddr, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "BASE_URL") {
			t.Errorf("%q: %v does not name BASE_URL", tc.base, err)
		}
	}
}
