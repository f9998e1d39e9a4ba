package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// partnerCall is one request of an API client to the public listener.
func partnerCall(t *testing.T, d *daemon, tok, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+d.public+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// TestWebhookCommands: an operator lists the webhook endpoints a client
// registered (`webhook list`, never a secret) and disables one (`webhook
// disable`): the client then sees it disabled by an administrator and
// cannot enable it again. A member without settings access is refused and
// the refusal is in the audit log; an endpoint of another workspace is not
// found.
func TestWebhookCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dataDir, err := os.MkdirTemp("", "partnerapi-webhook-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	d := startServe(t, bin, dataDir, "")
	ws := cli(t, bin, d, "", "workspace", "create", "--name", "Hooks")["id"].(string)
	m := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "ops@hooks.test", "--settings-access")["id"].(string)
	c := cli(t, bin, d, "", "client", "create", "--workspace", ws, "--member", m, "--name", "Router", "--scopes", "leads:read webhooks:read webhooks:write")
	code, tok := token(t, d, c["clientId"].(string), c["clientSecret"].(string))
	if code != http.StatusOK {
		t.Fatalf("token: %d", code)
	}
	code, ep := partnerCall(t, d, tok, "POST", "/api/v1/webhook-endpoints", `{"url":"https://hooks.example.com/partner","eventTypes":["lead.created"]}`)
	id, _ := ep["id"].(string)
	if code != http.StatusCreated || !strings.HasPrefix(id, "whe_") {
		t.Fatalf("create endpoint: %d %v", code, ep)
	}

	list := cli(t, bin, d, "", "webhook", "list", "--workspace", ws, "--member", m)
	eps, _ := list["webhookEndpoints"].([]any)
	if len(eps) != 1 || len(list) != 1 {
		t.Fatalf("webhook list = %v, want the one endpoint", list)
	}
	got := eps[0].(map[string]any)
	if got["id"] != id || got["clientId"] != c["clientId"] || got["url"] != "https://hooks.example.com/partner" || got["status"] != "enabled" {
		t.Fatalf("webhook list = %v", got)
	}
	for k, v := range got {
		if s, _ := v.(string); strings.Contains(strings.ToLower(k), "secret") || strings.HasPrefix(s, "whsec_") {
			t.Fatalf("webhook list shows a secret: %s = %v", k, v)
		}
	}
	if byClient := cli(t, bin, d, "", "webhook", "list", "--workspace", ws, "--member", m, "--client", c["clientId"].(string)); len(byClient["webhookEndpoints"].([]any)) != 1 {
		t.Fatalf("webhook list --client = %v", byClient)
	}

	// A member without settings access is refused, and audited.
	plain := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "plain@hooks.test")["id"].(string)
	if msg := cliFails(t, bin, d, "", "webhook", "list", "--workspace", ws, "--member", plain); !strings.Contains(msg, "permission_denied") {
		t.Fatalf("webhook list by a member without settings access: %q", msg)
	}
	// Another workspace's member does not find the endpoint.
	other := cli(t, bin, d, "", "workspace", "create", "--name", "Elsewhere")["id"].(string)
	om := cli(t, bin, d, "", "member", "add", "--workspace", other, "--email", "ops@elsewhere.test", "--settings-access")["id"].(string)
	if msg := cliFails(t, bin, d, "", "webhook", "disable", "--member", om, id); !strings.Contains(msg, "not_found") {
		t.Fatalf("webhook disable from another workspace: %q", msg)
	}

	out := cli(t, bin, d, "", "webhook", "disable", "--member", m, id)
	dis, _ := out["webhookEndpoint"].(map[string]any)
	if dis["id"] != id || dis["status"] != "disabled" || dis["disabledReason"] != "admin" {
		t.Fatalf("webhook disable = %v", out)
	}
	// The client sees why, and cannot undo it.
	if code, ep := partnerCall(t, d, tok, "GET", "/api/v1/webhook-endpoints/"+id, ""); code != http.StatusOK || ep["status"] != "disabled" || ep["disabledReason"] != "admin" {
		t.Fatalf("the client's view after disable: %d %v", code, ep)
	}
	if code, ep := partnerCall(t, d, tok, "PATCH", "/api/v1/webhook-endpoints/"+id, `{"status":"enabled"}`); code < 400 || code >= 500 {
		t.Fatalf("the client enabled an endpoint an administrator disabled: %d %v", code, ep)
	}

	audit := cli(t, bin, d, "", "audit", "list", "--workspace", ws, "--member", m)
	var seen []string
	for _, e := range audit["events"].([]any) {
		e := e.(map[string]any)
		if a, _ := e["action"].(string); strings.HasPrefix(a, "webhook_endpoint.") && e["actorMemberId"] != "" {
			seen = append(seen, a+" "+e["outcome"].(string)+" "+e["actorMemberId"].(string))
		}
	}
	want := []string{ // newest first
		"webhook_endpoint.disable succeeded " + m,
		"webhook_endpoint.list refused " + plain,
		"webhook_endpoint.list succeeded " + m,
		"webhook_endpoint.list succeeded " + m,
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

// TestCLIDisableWebhooks: after a leak, `client rotate-secret
// --disable-webhooks`, `client deactivate --revoke-tokens
// --disable-webhooks` and `client revoke --disable-webhooks` disable every
// webhook endpoint of the client (credentials_revoked; a revoked client's
// client_revoked), which `client activate` does not bring back; without
// the flag a rotation leaves the endpoint enabled (documented). `audit
// list` shows each as api_client.disable_webhooks, and the endpoint's
// create with the client, the token's hash prefix and the source address.
// Before, the flag did not exist (a usage error) and the create's event
// had no token or source.
func TestCLIDisableWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dataDir, err := os.MkdirTemp("", "partnerapi-leak-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	d := startServe(t, bin, dataDir, "")
	ws := cli(t, bin, d, "", "workspace", "create", "--name", "Leak")["id"].(string)
	m := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "ops@leak.test", "--settings-access")["id"].(string)
	// newEndpoint makes a client and, with its secret, an endpoint.
	newEndpoint := func(name string) (clientID, endpointID, tok string) {
		c := cli(t, bin, d, "", "client", "create", "--workspace", ws, "--member", m, "--name", name, "--scopes", "leads:read webhooks:write")
		code, tok := token(t, d, c["clientId"].(string), c["clientSecret"].(string))
		if code != http.StatusOK {
			t.Fatalf("token: %d", code)
		}
		code, ep := partnerCall(t, d, tok, "POST", "/api/v1/webhook-endpoints", `{"url":"https://thief.example/`+name+`","eventTypes":["lead.created"]}`)
		if code != http.StatusCreated {
			t.Fatalf("create endpoint: %d %v", code, ep)
		}
		return c["clientId"].(string), ep["id"].(string), tok
	}
	state := func(clientID string) string {
		eps := cli(t, bin, d, "", "webhook", "list", "--workspace", ws, "--member", m, "--client", clientID)["webhookEndpoints"].([]any)
		e := eps[0].(map[string]any)
		return strings.TrimSpace(e["status"].(string) + " " + e["disabledReason"].(string))
	}

	rotated, ep, stolen := newEndpoint("rotated")
	cli(t, bin, d, "", "client", "rotate-secret", "--member", m, rotated)
	if got := state(rotated); got != "enabled" {
		t.Fatalf("after rotate-secret without --disable-webhooks: %q, want enabled", got)
	}
	out := cli(t, bin, d, "", "client", "rotate-secret", "--member", m, "--disable-webhooks", rotated)
	if s, _ := out["clientSecret"].(string); !strings.HasPrefix(s, "svcs_") {
		t.Fatalf("rotate-secret --disable-webhooks = %v", out)
	}
	if got := state(rotated); got != "disabled credentials_revoked" {
		t.Fatalf("after rotate-secret --disable-webhooks: %q", got)
	}

	deactivated, _, _ := newEndpoint("deactivated")
	cli(t, bin, d, "", "client", "deactivate", "--member", m, "--revoke-tokens", "--disable-webhooks", deactivated)
	cli(t, bin, d, "", "client", "activate", "--member", m, deactivated)
	if got := state(deactivated); got != "disabled credentials_revoked" {
		t.Fatalf("after deactivate --revoke-tokens --disable-webhooks and activate: %q", got)
	}

	revoked, _, _ := newEndpoint("revoked")
	cli(t, bin, d, "", "client", "revoke", "--member", m, "--disable-webhooks", revoked)
	if got := state(revoked); got != "disabled client_revoked" {
		t.Fatalf("after revoke --disable-webhooks: %q", got)
	}

	sum := sha256.Sum256([]byte(stolen))
	var disabled []string
	created := false
	for _, e := range cli(t, bin, d, "", "audit", "list", "--workspace", ws, "--member", m)["events"].([]any) {
		e := e.(map[string]any)
		switch e["action"] {
		case "api_client.disable_webhooks":
			disabled = append(disabled, e["clientId"].(string))
		case "webhook_endpoint.create":
			if e["targetId"] == ep {
				created = true
				if e["clientId"] != rotated || e["tokenHashPrefix"] != hex.EncodeToString(sum[:8]) || e["sourceAddress"] != "127.0.0.1" {
					t.Errorf("the endpoint's create in the audit log: %v", e)
				}
			}
		}
	}
	if want := []string{revoked, deactivated, rotated}; strings.Join(disabled, " ") != strings.Join(want, " ") { // newest first
		t.Errorf("api_client.disable_webhooks events for %v, want %v", disabled, want)
	}
	if !created {
		t.Error("no webhook_endpoint.create event of the endpoint")
	}
}
