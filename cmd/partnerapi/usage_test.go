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
