package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

// run1 runs the binary and returns its exit code, stdout and stderr.
func run1(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatal(err)
	return 0, "", ""
}

// TestCLIHelpAndVersion: every command's --help shows its flags on stdout
// and exits 0; serve --help lists every environment variable the code
// reads; version prints the version; a repeated single-value flag is an
// error.
func TestCLIHelpAndVersion(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	t.Run("command help", func(t *testing.T) {
		for _, c := range commands {
			code, out, errOut := run1(t, bin, append(strings.Fields(c.name), "--help")...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: partnerapi "+c.name+" ") {
				t.Errorf("%s --help: exit %d, stdout %q, stderr %q", c.name, code, out, errOut)
			}
			for _, f := range append(c.flags, "admin-url", "admin-token") {
				if !strings.Contains(out, "--"+f+" ") && !strings.Contains(out, "--"+f+"\n") {
					t.Errorf("%s --help lacks --%s:\n%s", c.name, f, out)
				}
			}
		}
		for _, group := range []string{"client", "workspace", "member", "webhook", "audit"} {
			if code, out, _ := run1(t, bin, group, "--help"); code != 0 || !strings.Contains(out, "partnerapi "+group+" ") {
				t.Errorf("%s --help: exit %d\n%s", group, code, out)
			}
		}
		// migrate lists what it reads (the database), not serve's listeners.
		if code, out, _ := run1(t, bin, "migrate", "-h"); code != 0 || !strings.Contains(out, "--database-url") ||
			!strings.Contains(out, "PARTNER_DIRECT_DATABASE_URL") || strings.Contains(out, "--http-addr") || strings.Contains(out, "PARTNER_RATE_READ") {
			t.Errorf("migrate -h: exit %d\n%s", code, out)
		}
	})
	t.Run("serve help lists every environment variable", func(t *testing.T) {
		code, out, _ := run1(t, bin, "serve", "--help")
		if code != 0 {
			t.Fatalf("serve --help: exit %d", code)
		}
		for _, f := range []string{"--http-addr", "--admin-addr", "--admin-token", "--database-url", "--data-dir"} {
			if !strings.Contains(out, f) {
				t.Errorf("serve --help lacks %s", f)
			}
		}
		for _, name := range variablesInCode(t) {
			if !regexp.MustCompile(`(?m)^\s+` + name + `\s`).MatchString(out) {
				t.Errorf("serve --help does not list %s, which the code reads", name)
			}
		}
	})
	t.Run("version", func(t *testing.T) {
		code, out, _ := run1(t, bin, "version")
		if code != 0 || !strings.HasPrefix(out, "partnerapi "+release+" (build ") || strings.Count(out, "\n") != 1 {
			t.Errorf("version: exit %d %q", code, out)
		}
	})
	t.Run("repeated flags", func(t *testing.T) {
		for _, args := range [][]string{
			{"workspace", "create", "--name", "A", "--name", "B"},
			{"client", "list", "--workspace", "wks_a", "--member", "mem_a", "--member", "mem_b"},
			{"member", "add", "--workspace", "w", "--email", "e", "--settings-access", "--settings-access"},
			{"serve", "--http-addr", ":1", "--http-addr", ":2"},
		} {
			code, out, errOut := run1(t, bin, args...)
			if code != 2 || out != "" || !strings.Contains(errOut, "given more than once") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
			}
		}
		// Repeatable flags stay repeatable.
		code, _, errOut := run1(t, bin, "client", "create", "--redirect-uri", "https://a.example", "--redirect-uri", "https://b.example", "--help")
		if code != 0 {
			t.Errorf("repeated --redirect-uri refused: %s", errOut)
		}
	})
}

// variablesInCode finds the environment variables the service's code
// names (PARTNER_*, DATABASE_URL, OTEL_*, GO*), outside tests and test
// helpers.
func variablesInCode(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`"((?:PARTNER|OTEL)_[A-Z0-9_]+|DATABASE_URL|GOGC|GOMEMLIMIT)"`)
	seen := map[string]bool{}
	var out []string
	for _, root := range []string{"../../cmd", "../../internal", "../../db"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "dbtest" || d.Name() == "servertest" || d.Name() == "partnerbench") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				if !seen[m[1]] {
					seen[m[1]] = true
					out = append(out, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 5 {
		t.Fatalf("found only %v", out)
	}
	return out
}

// TestErrorNamesTheCodeOnce: an API error whose message already begins
// with its reason is printed as is, not "permission_denied:
// permission_denied: …".
func TestErrorNamesTheCodeOnce(t *testing.T) {
	t.Parallel()
	ce := connect.NewError(connect.CodePermissionDenied, errors.New("permission_denied: the member has no settings access"))
	d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: "permission_denied", Domain: "partner-api"})
	if err != nil {
		t.Fatal(err)
	}
	ce.AddDetail(d)
	_, got := call[struct{}](nil, ce)
	if got == nil || got.Error() != "permission_denied: the member has no settings access" {
		t.Errorf("error = %v", got)
	}
	// Without our detail, the RPC code leads.
	_, got = call[struct{}](nil, connect.NewError(connect.CodeInternal, errors.New("boom")))
	if got == nil || got.Error() != "internal: boom" {
		t.Errorf("error = %v", got)
	}
}
