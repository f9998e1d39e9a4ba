package main

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCLIUsageErrorsSendNothing: a management command that cannot mean
// what was typed (a stray argument, a flag the command does not take, a
// number out of range, an unknown command even with --help) is a usage
// error: exit 2, the reason and the usage on stderr, nothing on stdout,
// and no request reaches the admin API. Before, `client create … extra`
// and `client list … extra` ignored the argument, `client list --name X`
// listed everything, `audit list --limit 4294967297` asked for 1 event
// (the int32 conversion wrapped) and `client bogus --help` exited 0.
func TestCLIUsageErrorsSendNothing(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	var calls atomic.Int64
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	t.Cleanup(admin.Close)
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"client", "create", "--workspace", "wks_a", "--member", "mem_a", "--name", "n", "--scopes", "contacts:read", "extra"}, `unexpected argument "extra"`},
		{[]string{"client", "list", "--workspace", "wks_a", "--member", "mem_a", "extra"}, `unexpected argument "extra"`},
		{[]string{"client", "list", "--workspace", "wks_a", "--member", "mem_a", "--name", "Zapier"}, "--name"},
		{[]string{"client", "rotate-secret", "--member", "mem_a", "--read-rate", "5", "cli_a"}, "--read-rate"},
		{[]string{"client", "deactivate", "--member", "mem_a", "--disable-webhooks", "cli_a"}, "--disable-webhooks needs --revoke-tokens"},
		{[]string{"workspace", "create", "--name", "A", "--member", "mem_a"}, "--member"},
		{[]string{"audit", "list", "--workspace", "wks_a", "--member", "mem_a", "--limit", "4294967297"}, "--limit"},
		{[]string{"audit", "list", "--workspace", "wks_a", "--member", "mem_a", "--limit", "-1"}, "--limit"},
		{[]string{"client", "bogus", "--help"}, `unknown command "client bogus"`},
		{[]string{"workspace", "delete", "-h"}, `unknown command "workspace delete"`},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = append(os.Environ(), "PARTNER_ADMIN_URL="+admin.URL, "PARTNER_ADMIN_TOKEN=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit 2; stderr %q", tc.args, err, stderr.String())
		}
		if stdout.Len() != 0 || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "usage: partnerapi") {
			t.Errorf("%v: stdout %q, stderr %q, want %q and the usage", tc.args, stdout.String(), stderr.String(), tc.want)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("usage errors sent %d requests to the admin API", n)
	}
}

// TestHelpShowsOneDefaultPerFlag: no flag line of a command's --help
// names two defaults, and `member sign-in-link --help` says the --ttl
// default once, 5m, the server's (issue 36). Before, it printed "(default
// 5m) (default "0s")" under a synopsis reading "[--ttl 60s]".
func TestHelpShowsOneDefaultPerFlag(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, c := range commands {
		code, out, _ := run1(t, bin, append(strings.Fields(c.name), "--help")...)
		if code != 0 {
			t.Fatalf("%s --help: exit %d", c.name, code)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") && strings.Count(line, "default") > 1 {
				t.Errorf("%s --help: %q names two defaults", c.name, line)
			}
		}
	}
	_, out, _ := run1(t, bin, "member", "sign-in-link", "--help")
	var ttl []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--ttl ") {
			ttl = append(ttl, line)
		}
	}
	if len(ttl) != 1 || !strings.HasSuffix(ttl[0], "1s to 5m, e.g. 60s (default 5m)") {
		t.Errorf("member sign-in-link --help: --ttl lines %q, want one ending in the one default, 5m:\n%s", ttl, out)
	}
	if first := strings.SplitN(out, "\n", 2)[0]; first != "usage: partnerapi member sign-in-link --member M [--ttl D]   (a one-time link to the workspace settings page; give it to the member's browser at once)" {
		t.Errorf("member sign-in-link --help: synopsis %q", first)
	}
}

// TestGroupWithoutSubcommandPrintsItsOwnUsage: `partnerapi audit` (and
// every other group) without a subcommand, or with an unknown one, exits 2
// with the reason and the group's own commands on stderr, not the usage
// of every command (issue 36).
func TestGroupWithoutSubcommandPrintsItsOwnUsage(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, group := range []string{"audit", "workspace", "member", "client", "webhook"} {
		for _, args := range [][]string{{group}, {group, "bogus"}} {
			code, out, errOut := run1(t, bin, args...)
			want := group + ": a subcommand is required"
			if len(args) == 2 {
				want = `unknown command "` + group + ` bogus"`
			}
			if code != 2 || out != "" || !strings.HasPrefix(errOut, "partnerapi: "+want+"\n\nusage: partnerapi "+group+" <command> [flags]\n\ncommands:\n") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q, then the group's usage", args, code, out, errOut, want)
				continue
			}
			for _, c := range commands {
				in := strings.Contains(errOut, "  partnerapi "+c.name+" "+c.synopsis+"\n")
				if ours := strings.HasPrefix(c.name, group+" "); in != ours {
					t.Errorf("%v: lists %q: %v, want %v:\n%s", args, c.name, in, ours, errOut)
				}
			}
			if strings.Contains(errOut, "serve ") || strings.Contains(errOut, "version") {
				t.Errorf("%v: printed the usage of every command:\n%s", args, errOut)
			}
		}
	}
}
