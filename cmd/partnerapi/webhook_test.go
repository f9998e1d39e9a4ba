package main

import (
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
