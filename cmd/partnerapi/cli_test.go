package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svat/partnerapi/db/dbtest"
)

// binary is the real partnerapi binary, built once per test run into a
// directory TestMain removes.
var binary = struct {
	once sync.Once
	dir  string
	path string
	out  []byte
	err  error
}{}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// buildBinary compiles the real partnerapi binary once per test run and
// returns its path.
func buildBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "partnerapi-bin-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "partnerapi")
		binary.out, binary.err = exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput()
	})
	if binary.err != nil {
		t.Fatalf("go build: %v\n%s", binary.err, binary.out)
	}
	return binary.path
}

// syncBuffer is a bytes.Buffer safe to read while the child process's
// output is being copied into it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type daemon struct {
	cmd    *exec.Cmd
	public string
	admin  string
	log    *syncBuffer
}

// startServe runs `partnerapi serve` on the embedded PostgreSQL in dataDir
// and waits for /readyz. The listeners bind port 0 and the test reads the
// chosen addresses from the "serving" log line, so no other process can
// take a port between choosing and binding it.
func startServe(t *testing.T, bin, dataDir, adminToken string) *daemon {
	t.Helper()
	d := &daemon{log: &syncBuffer{}}
	d.cmd = exec.Command(bin, "serve")
	d.cmd.Env = append(os.Environ(), "PARTNER_HTTP_ADDR=127.0.0.1:0", "PARTNER_ADMIN_ADDR=127.0.0.1:0",
		"PARTNER_DATA_DIR="+dataDir, "PARTNER_ADMIN_TOKEN="+adminToken, "DATABASE_URL=")
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.stop(t) })
	d.waitReady(t)
	return d
}

// waitReady waits until the daemon has logged its addresses and its
// /readyz answers 200.
func (d *daemon) waitReady(t *testing.T) {
	t.Helper()
	ready := func() bool {
		if d.public == "" {
			d.public, d.admin = servingAddrs(d.log.String())
		}
		if d.public == "" {
			return false
		}
		res, err := http.Get("http://" + d.public + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}
	if !dbtest.Until(60*time.Second, ready) {
		t.Fatalf("serve not ready within 60s:\n%s", d.log)
	}
}

// servingAddrs finds the listener addresses in serve's JSON log.
func servingAddrs(log string) (public, admin string) {
	for _, line := range strings.Split(log, "\n") {
		var rec struct{ Msg, Public, Admin string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving" {
			return rec.Public, rec.Admin
		}
	}
	return "", ""
}

func (d *daemon) stop(t *testing.T) {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve exited with %v:\n%s", err, d.log)
		}
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		t.Errorf("serve did not stop on SIGTERM:\n%s", d.log)
	}
}

// cli runs one management command and decodes its single JSON object.
func cli(t *testing.T, bin string, d *daemon, token string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PARTNER_ADMIN_URL=http://"+d.admin, "PARTNER_ADMIN_TOKEN="+token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("partnerapi %v: %v\nstderr: %s", args, err, stderr.String())
	}
	if strings.Count(strings.TrimSpace(stdout.String()), "\n") != 0 {
		t.Fatalf("partnerapi %v printed more than one line: %q", args, stdout.String())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("partnerapi %v printed %q: %v", args, stdout.String(), err)
	}
	return out
}

func cliFails(t *testing.T, bin string, d *daemon, token string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PARTNER_ADMIN_URL=http://"+d.admin, "PARTNER_ADMIN_TOKEN="+token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("partnerapi %v succeeded; want failure", args)
	}
	if stdout.Len() != 0 {
		t.Errorf("failed command printed to stdout: %q", stdout.String())
	}
	return stderr.String()
}

func token(t *testing.T, d *daemon, id, sec string) (int, string) {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+d.public+"/api/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, sec)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body.AccessToken
}

func me(t *testing.T, d *daemon, tok string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+d.public+"/api/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestCLIAgainstRealServer runs the real binary: serve on the embedded
// PostgreSQL, then workspace create → member add → client create → token →
// rotate → deactivate/activate (a pause) → deactivate --revoke-tokens
// (the end of the tokens) → revoke through the CLI, then a restart that
// keeps the data. A wrong admin token is in serve's log with its route
// and source, never the token; a refused attempt and each read of the
// audit log are in the audit log.
func TestCLIAgainstRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dataDir, err := os.MkdirTemp("", "partnerapi-cli-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	const adminToken = "cli-test-admin-token"
	d := startServe(t, bin, dataDir, adminToken)

	if msg := cliFails(t, bin, d, "", "workspace", "create", "--name", "Acme"); strings.Count(msg, "unauthenticated") != 1 {
		t.Errorf("missing admin token: stderr %q", msg)
	}
	// --admin-token is sent like PARTNER_ADMIN_TOKEN.
	if flagged := cli(t, bin, d, "", "workspace", "create", "--name", "Flagged", "--admin-token", adminToken); flagged["name"] != "Flagged" {
		t.Fatalf("workspace with --admin-token = %v", flagged)
	}
	if msg := cliFails(t, bin, d, "", "workspace", "create", "--name", "Acme", "--admin-token", "wrong-"+adminToken); !strings.Contains(msg, "unauthenticated") || strings.Contains(msg, adminToken) {
		t.Errorf("wrong admin token: stderr %q", msg)
	}
	ws := cli(t, bin, d, adminToken, "workspace", "create", "--name", "Acme")
	wsID, _ := ws["id"].(string)
	if !strings.HasPrefix(wsID, "wks_") || ws["name"] != "Acme" {
		t.Fatalf("workspace = %v", ws)
	}
	m := cli(t, bin, d, adminToken, "member", "add", "--workspace", wsID, "--email", "Ops@Acme.test", "--settings-access")
	memberID, _ := m["id"].(string)
	if !strings.HasPrefix(memberID, "mem_") || m["email"] != "ops@acme.test" || m["settingsAccess"] != true || m["approved"] != true {
		t.Fatalf("member = %v", m)
	}
	pending := cli(t, bin, d, adminToken, "member", "add", "--workspace", wsID, "--email", "new@acme.test", "--pending")
	if pending["approved"] != false {
		t.Fatalf("pending member = %v", pending)
	}
	if msg := cliFails(t, bin, d, adminToken, "client", "create", "--workspace", wsID, "--member", pending["id"].(string),
		"--name", "X", "--scopes", "contacts:read"); strings.Count(msg, "permission_denied") != 1 || strings.Count(msg, "\n") != 1 {
		t.Errorf("pending member: stderr %q", msg)
	}
	if msg := cliFails(t, bin, d, adminToken, "client", "create", "--workspace", wsID, "--member", memberID,
		"--name", "X", "--scopes", "contacts:read everything"); !strings.Contains(msg, "unknown scope") {
		t.Errorf("unknown scope: stderr %q", msg)
	}

	c := cli(t, bin, d, adminToken, "client", "create", "--workspace", wsID, "--member", memberID,
		"--name", "Zapier", "--scopes", "contacts:read leads:read")
	clientID, _ := c["clientId"].(string)
	sec, _ := c["clientSecret"].(string)
	if !strings.HasPrefix(clientID, "cli_") || sec == "" {
		t.Fatalf("client = %v", c)
	}
	list := cli(t, bin, d, adminToken, "client", "list", "--workspace", wsID, "--member", memberID)
	if b, _ := json.Marshal(list); strings.Contains(string(b), sec) || !strings.Contains(string(b), clientID) {
		t.Fatalf("list = %s", b)
	}

	// Per-client rates: shown when set, 0 returns to the server default.
	limited := cli(t, bin, d, adminToken, "client", "create", "--workspace", wsID, "--member", memberID,
		"--name", "Limited", "--scopes", "contacts:read", "--read-rate", "5")
	lc, _ := limited["client"].(map[string]any)
	if lc["readRate"] != float64(5) || lc["writeRate"] != nil {
		t.Fatalf("create --read-rate = %v", limited)
	}
	limitedID, _ := limited["clientId"].(string)
	rates := cli(t, bin, d, adminToken, "client", "set-rates", "--member", memberID, "--write-rate", "7", limitedID)
	if rc, _ := rates["client"].(map[string]any); rc["readRate"] != float64(5) || rc["writeRate"] != float64(7) {
		t.Fatalf("set-rates = %v", rates)
	}
	rates = cli(t, bin, d, adminToken, "client", "set-rates", "--member", memberID, limitedID, "--read-rate", "0")
	if rc, _ := rates["client"].(map[string]any); rc["readRate"] != nil || rc["writeRate"] != float64(7) {
		t.Fatalf("set-rates --read-rate 0 = %v", rates)
	}
	if msg := cliFails(t, bin, d, adminToken, "client", "set-rates", "--member", memberID, limitedID); !strings.Contains(msg, "--read-rate") {
		t.Errorf("set-rates without a rate: stderr %q", msg)
	}

	status, tok := token(t, d, clientID, sec)
	if status != 200 || !strings.HasPrefix(tok, "svat_") {
		t.Fatalf("token: %d %q", status, tok)
	}
	if s, body := me(t, d, tok); s != 200 || !strings.Contains(body, wsID) {
		t.Fatalf("/me: %d %s", s, body)
	}

	rot := cli(t, bin, d, adminToken, "client", "rotate-secret", "--member", memberID, clientID)
	newSec, _ := rot["clientSecret"].(string)
	if newSec == "" || newSec == sec {
		t.Fatalf("rotate = %v", rot)
	}
	if s, _ := me(t, d, tok); s != 401 {
		t.Fatalf("old token after rotate: %d", s)
	}
	if s, _ := token(t, d, clientID, sec); s != 401 {
		t.Fatalf("old secret after rotate: %d", s)
	}
	status, tok = token(t, d, clientID, newSec)
	if status != 200 {
		t.Fatalf("new secret: %d", status)
	}

	// Restart: the data survives.
	d.stop(t)
	// serve has exited, so its log is complete: the wrong admin token
	// above is logged with its route and source, never the token.
	logged := false
	for _, line := range strings.Split(d.log.String(), "\n") {
		logged = logged || strings.Contains(line, `"msg":"admin token refused"`) &&
			strings.Contains(line, `"route":"/partner.admin.v1.AdminService/CreateWorkspace"`) &&
			strings.Contains(line, `"source":"127.0.0.1"`) && strings.Contains(line, `"reason":"wrong_token"`)
	}
	if !logged {
		t.Errorf("the wrong admin token is not logged with its route and source:\n%s", d.log)
	}
	if strings.Contains(d.log.String(), adminToken) {
		t.Error("serve's log holds the admin token")
	}
	d = startServe(t, bin, dataDir, adminToken)
	if s, body := me(t, d, tok); s != 200 {
		t.Fatalf("token after restart: %d %s", s, body)
	}

	// deactivate is a pause: activate makes the old token work again.
	cli(t, bin, d, adminToken, "client", "deactivate", "--member", memberID, clientID)
	if s, _ := me(t, d, tok); s != 401 {
		t.Fatalf("token of a deactivated client: %d", s)
	}
	cli(t, bin, d, adminToken, "client", "activate", "--member", memberID, clientID)
	if s, _ := me(t, d, tok); s != 200 {
		t.Fatalf("token after deactivate and activate: %d, want 200 (a pause)", s)
	}
	// deactivate --revoke-tokens ends them: activate does not bring the old
	// token back; the secret still gets a new one.
	deact := cli(t, bin, d, adminToken, "client", "deactivate", "--revoke-tokens", "--member", memberID, clientID)
	if cl, _ := deact["client"].(map[string]any); cl["status"] != "inactive" {
		t.Fatalf("deactivate --revoke-tokens = %v", deact)
	}
	cli(t, bin, d, adminToken, "client", "activate", "--member", memberID, clientID)
	if s, _ := me(t, d, tok); s != 401 {
		t.Fatalf("token after deactivate --revoke-tokens and activate: %d, want 401", s)
	}
	if status, tok = token(t, d, clientID, newSec); status != 200 {
		t.Fatalf("new token after deactivate --revoke-tokens and activate: %d", status)
	}
	if s, _ := me(t, d, tok); s != 200 {
		t.Fatalf("new token: %d", s)
	}

	rev := cli(t, bin, d, adminToken, "client", "revoke", clientID, "--member", memberID)
	if cl, _ := rev["client"].(map[string]any); cl["status"] != "revoked" {
		t.Fatalf("revoke = %v", rev)
	}
	if s, _ := me(t, d, tok); s != 401 {
		t.Fatalf("token after revoke: %d", s)
	}
	if s, _ := token(t, d, clientID, newSec); s != 401 {
		t.Fatalf("issuance after revoke: %d", s)
	}
	audit := cli(t, bin, d, adminToken, "audit", "list", "--workspace", wsID, "--member", memberID)
	if evs, _ := audit["events"].([]any); len(evs) < 4 {
		t.Fatalf("audit = %v", audit)
	}
	var actions []string
	refusedCreate := false
	for _, e := range audit["events"].([]any) {
		ev := e.(map[string]any)
		actions = append(actions, ev["action"].(string))
		if ev["action"] == "api_client.create" && ev["actorMemberId"] == pending["id"] {
			refusedCreate = ev["outcome"] == "refused" && ev["reason"] == "not_approved"
		}
	}
	if want := "api_client.revoke api_client.activate api_client.revoke_tokens api_client.deactivate api_client.activate api_client.deactivate"; !strings.HasPrefix(strings.Join(actions, " "), want) {
		t.Errorf("audit actions = %v, want them to begin with %s", actions, want)
	}
	if !refusedCreate {
		t.Errorf("the pending member's refused create is not audited as refused: %v", audit)
	}
	// Page by page: the second page starts where the first ended. Each
	// read is audited after its page: the first page begins with the read
	// of the whole log above.
	first := cli(t, bin, d, adminToken, "audit", "list", "--workspace", wsID, "--member", memberID, "--limit", "2")
	next, _ := first["nextPageToken"].(string)
	second := cli(t, bin, d, adminToken, "audit", "list", "--workspace", wsID, "--member", memberID, "--limit", "2", "--page-token", next)
	all, _ := audit["events"].([]any)
	p1, _ := first["events"].([]any)
	p2, _ := second["events"].([]any)
	if next == "" || len(p1) != 2 || len(p2) != 2 || p1[0].(map[string]any)["action"] != "audit_event.list" ||
		p1[0].(map[string]any)["actorMemberId"] != memberID || p1[1].(map[string]any)["id"] != all[0].(map[string]any)["id"] ||
		p2[0].(map[string]any)["id"] != all[1].(map[string]any)["id"] {
		t.Fatalf("audit pages = %v then %v; all = %v", first, second, audit)
	}
}
