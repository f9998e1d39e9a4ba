package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestWebhookEnableCommand: `webhook enable` undoes an administrator's
// `webhook disable` (the client's own PATCH status enabled is refused
// with 409, and its detail says an administrator disabled it): the
// endpoint is enabled, the client sees it enabled, and the enable is in
// the audit log. A member of another workspace does not find the endpoint
// and writes nothing to this workspace's log; a revoked client's endpoint
// cannot be enabled (failed_precondition), and neither can one the client
// disabled itself (the client's to enable). `webhook --help` lists it.
func TestWebhookEnableCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dataDir, err := os.MkdirTemp("", "partnerapi-webhook-enable-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	d := startServe(t, bin, dataDir, "")
	ws := cli(t, bin, d, "", "workspace", "create", "--name", "Hooks")["id"].(string)
	m := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "ops@hooks.test", "--settings-access")["id"].(string)
	c := cli(t, bin, d, "", "client", "create", "--workspace", ws, "--member", m, "--name", "Router", "--scopes", "leads:read webhooks:read webhooks:write")
	clientID := c["clientId"].(string)
	code, tok := token(t, d, clientID, c["clientSecret"].(string))
	if code != http.StatusOK {
		t.Fatalf("token: %d", code)
	}
	create := func() string {
		t.Helper()
		code, ep := partnerCall(t, d, tok, "POST", "/api/v1/webhook-endpoints", `{"url":"https://hooks.example.com/partner","eventTypes":["lead.created"]}`)
		id, _ := ep["id"].(string)
		if code != http.StatusCreated || !strings.HasPrefix(id, "whe_") {
			t.Fatalf("create endpoint: %d %v", code, ep)
		}
		return id
	}
	id := create()

	out := cli(t, bin, d, "", "webhook", "disable", "--member", m, id)
	if ep, _ := out["webhookEndpoint"].(map[string]any); ep["status"] != "disabled" || ep["disabledReason"] != "admin" {
		t.Fatalf("webhook disable = %v", out)
	}
	// The client cannot undo it, and is told who disabled it.
	code, problem := partnerCall(t, d, tok, "PATCH", "/api/v1/webhook-endpoints/"+id, `{"status":"enabled"}`)
	if detail, _ := problem["detail"].(string); code != http.StatusConflict || !strings.Contains(detail, "disabled by an administrator") ||
		!strings.Contains(detail, "partnerapi webhook enable") {
		t.Fatalf("the client's enable of an endpoint an administrator disabled: %d %v", code, problem)
	}

	// Another workspace's member does not find it, and this workspace's
	// audit log gets nothing of the attempt.
	other := cli(t, bin, d, "", "workspace", "create", "--name", "Elsewhere")["id"].(string)
	om := cli(t, bin, d, "", "member", "add", "--workspace", other, "--email", "ops@elsewhere.test", "--settings-access")["id"].(string)
	if msg := cliFails(t, bin, d, "", "webhook", "enable", "--member", om, id); !strings.Contains(msg, "not_found") {
		t.Fatalf("webhook enable from another workspace: %q", msg)
	}
	if msg := cliFails(t, bin, d, "", "webhook", "enable", id); !strings.Contains(msg, "--member") {
		t.Fatalf("webhook enable without --member: %q", msg)
	}

	out = cli(t, bin, d, "", "webhook", "enable", "--member", m, id)
	en, _ := out["webhookEndpoint"].(map[string]any)
	if en["id"] != id || en["status"] != "enabled" || (en["disabledReason"] != nil && en["disabledReason"] != "") {
		t.Fatalf("webhook enable = %v", out)
	}
	if code, ep := partnerCall(t, d, tok, "GET", "/api/v1/webhook-endpoints/"+id, ""); code != http.StatusOK || ep["status"] != "enabled" || (ep["disabledReason"] != nil && ep["disabledReason"] != "") {
		t.Fatalf("the client's view after enable: %d %v", code, ep)
	}
	// Enabling an enabled endpoint succeeds and changes nothing.
	if again := cli(t, bin, d, "", "webhook", "enable", "--member", m, id); again["webhookEndpoint"].(map[string]any)["status"] != "enabled" {
		t.Fatalf("webhook enable of an enabled endpoint = %v", again)
	}

	// One the client disabled itself is the client's to enable.
	if code, ep := partnerCall(t, d, tok, "PATCH", "/api/v1/webhook-endpoints/"+id, `{"status":"disabled"}`); code != http.StatusOK || ep["disabledReason"] != "manual" {
		t.Fatalf("the client's disable: %d %v", code, ep)
	}
	if msg := cliFails(t, bin, d, "", "webhook", "enable", "--member", m, id); !strings.Contains(msg, "failed_precondition") || !strings.Contains(msg, "disabled it itself") {
		t.Fatalf("webhook enable of an endpoint its client disabled: %q", msg)
	}

	// A revoked client's endpoints stay disabled for good.
	cli(t, bin, d, "", "client", "revoke", "--member", m, clientID)
	if msg := cliFails(t, bin, d, "", "webhook", "enable", "--member", m, id); !strings.Contains(msg, "failed_precondition") || !strings.Contains(msg, "revoked") {
		t.Fatalf("webhook enable of a revoked client's endpoint: %q", msg)
	}

	audit := cli(t, bin, d, "", "audit", "list", "--workspace", ws, "--member", m)
	var seen []string
	for _, e := range audit["events"].([]any) {
		e := e.(map[string]any)
		a, _ := e["action"].(string)
		if a == "webhook_endpoint.enable" || a == "webhook_endpoint.disable" {
			seen = append(seen, a+" "+e["outcome"].(string)+" "+e["actorMemberId"].(string)+" "+e["targetId"].(string))
		}
		if e["actorMemberId"] == om {
			t.Fatalf("the other workspace's member is in this workspace's audit log: %v", e)
		}
	}
	want := []string{ // newest first
		"webhook_endpoint.enable succeeded " + m + " " + id,
		"webhook_endpoint.enable succeeded " + m + " " + id,
		"webhook_endpoint.disable succeeded " + m + " " + id,
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}

	if code, help, _ := run1(t, bin, "webhook", "--help"); code != 0 || !strings.Contains(help, "enable --member M ENDPOINT_ID") {
		t.Fatalf("webhook --help does not list enable:\n%s", help)
	}
}
