package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIOperatorCommands: an operator lists workspaces and members
// (paged, oldest first), learns the id of a member whose email is already
// there from the duplicate's message, and grants and withdraws settings
// access, which is audited and holds from the next management call
// (issue 24, item 9). Before, `workspace list`, `member list` and `member
// update` did not exist and the duplicate said only "duplicate".
func TestCLIOperatorCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	d := startServe(t, bin, t.TempDir(), "")

	a := cli(t, bin, d, "", "workspace", "create", "--name", "Acme")
	b := cli(t, bin, d, "", "workspace", "create", "--name", "Globex")
	first := cli(t, bin, d, "", "workspace", "list", "--limit", "1")
	ws := first["workspaces"].([]any)
	if len(ws) != 1 || ws[0].(map[string]any)["id"] != a["id"] || first["nextPageToken"] == "" {
		t.Fatalf("workspace list --limit 1 = %v; want Acme and a next page token", first)
	}
	rest := cli(t, bin, d, "", "workspace", "list", "--page-token", first["nextPageToken"].(string))
	ws = rest["workspaces"].([]any)
	if len(ws) != 1 || ws[0].(map[string]any)["id"] != b["id"] || ws[0].(map[string]any)["name"] != "Globex" || rest["nextPageToken"] != "" {
		t.Fatalf("workspace list, page 2 = %v; want Globex and no next page", rest)
	}

	wsA := a["id"].(string)
	owner := cli(t, bin, d, "", "member", "add", "--workspace", wsA, "--email", "owner@acme.test", "--settings-access")
	helper := cli(t, bin, d, "", "member", "add", "--workspace", wsA, "--email", "helper@acme.test")
	members := cli(t, bin, d, "", "member", "list", "--workspace", wsA)["members"].([]any)
	if len(members) != 2 || members[0].(map[string]any)["id"] != owner["id"] || members[1].(map[string]any)["email"] != "helper@acme.test" ||
		members[1].(map[string]any)["settingsAccess"] != false {
		t.Fatalf("member list = %v; want owner, then helper without settings access", members)
	}
	if got := cli(t, bin, d, "", "member", "list", "--workspace", b["id"].(string))["members"].([]any); len(got) != 0 {
		t.Fatalf("member list of another workspace = %v, want none of Acme's", got)
	}

	stderr := cliFails(t, bin, d, "", "member", "add", "--workspace", wsA, "--email", "Owner@acme.test")
	if !strings.Contains(stderr, owner["id"].(string)) {
		t.Fatalf("re-adding an existing member: %q; want the existing member's id %s in the message", stderr, owner["id"])
	}

	helperID := helper["id"].(string)
	create := []string{"client", "create", "--workspace", wsA, "--member", helperID, "--name", "Zap", "--scopes", "contacts:read"}
	if stderr := cliFails(t, bin, d, "", create...); !strings.Contains(stderr, "settings access") {
		t.Fatalf("client create by a member without settings access: %q", stderr)
	}
	granted := cli(t, bin, d, "", "member", "update", "--member", helperID, "--settings-access=true")
	if m := granted["member"].(map[string]any); m["id"] != helperID || m["settingsAccess"] != true {
		t.Fatalf("member update --settings-access=true = %v", granted)
	}
	cli(t, bin, d, "", create...)
	withdrawn := cli(t, bin, d, "", "member", "update", "--member", helperID, "--settings-access=false")
	if withdrawn["member"].(map[string]any)["settingsAccess"] != false {
		t.Fatalf("member update --settings-access=false = %v", withdrawn)
	}
	if stderr := cliFails(t, bin, d, "", "client", "list", "--workspace", wsA, "--member", helperID); !strings.Contains(stderr, "settings access") {
		t.Fatalf("client list after the access was withdrawn: %q; want a refusal", stderr)
	}
	events := cli(t, bin, d, "", "audit", "list", "--workspace", wsA, "--member", owner["id"].(string))["events"].([]any)
	changes := 0
	for _, e := range events {
		if ev := e.(map[string]any); ev["action"] == "member.set_settings_access" && ev["memberId"] == helperID {
			changes++
		}
	}
	if changes != 2 {
		t.Fatalf("audit log has %d settings access changes of the helper, want 2: %v", changes, events)
	}

	if stderr := cliFails(t, bin, d, "", "member", "update", "--member", helperID); !strings.Contains(stderr, "--settings-access") {
		t.Fatalf("member update without --settings-access: %q", stderr)
	}
	if stderr := cliFails(t, bin, d, "", "member", "update", "--member", "mem_00000000000000000000000000", "--settings-access=true"); !strings.Contains(stderr, "not found") {
		t.Fatalf("member update of an unknown member: %q", stderr)
	}
}

// TestCLIWrongFlagShowsTheCommandsUsage: a wrong flag prints the usage of
// the command that was typed, not the list of every command (issue 24,
// item 9).
func TestCLIWrongFlagShowsTheCommandsUsage(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"client", "list", "--bogus"}, "usage: partnerapi client list --workspace WS --member M"},
		{[]string{"member", "update", "--member", "mem_a", "--name", "x"}, "usage: partnerapi member update --member M --settings-access=true|false"},
		{[]string{"serve", "--bogus"}, "usage: partnerapi serve [flags]"},
	} {
		code, _, stderr := run1(t, bin, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "workspace create --name NAME") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and only %q", tc.args, code, stderr, tc.want)
		}
	}
	// An unknown command still lists every command.
	if code, _, stderr := run1(t, bin, "frobnicate"); code != 2 || !strings.Contains(stderr, "workspace create --name NAME") {
		t.Errorf("unknown command: exit %d, stderr %q; want the list of commands", code, stderr)
	}
}

// TestServeBindsBeforeStartingPostgreSQL: with its port taken, serve fails
// at once and names the address, before it starts an embedded PostgreSQL
// or migrates anything (issue 24, item 9).
func TestServeBindsBeforeStartingPostgreSQL(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	taken := ln.Addr().String()
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "PARTNER_HTTP_ADDR="+taken, "PARTNER_ADMIN_ADDR=127.0.0.1:0", "PARTNER_DATA_DIR="+dir, "DATABASE_URL=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "listen on PARTNER_HTTP_ADDR "+taken) {
		t.Fatalf("serve on a taken port: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres")); !os.IsNotExist(err) {
		t.Fatalf("serve created %s before failing to bind (err %v): it started PostgreSQL first", filepath.Join(dir, "postgres"), err)
	}
}

// TestMakeBuildStampsTheVersion: the binary `make build` writes names the
// commit it was built from, not "devel" (issue 24, item 9).
func TestMakeBuildStampsTheVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make")
	}
	t.Parallel()
	rev, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	out := filepath.Join(t.TempDir(), "partnerapi")
	if b, err := exec.Command("make", "-s", "-C", "../..", "build", "BIN="+out).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, b)
	}
	v, err := exec.Command(out, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(v), strings.TrimSpace(string(rev))) || strings.Contains(string(v), "devel") {
		t.Fatalf("version = %q; want the commit %s", v, rev)
	}
}
