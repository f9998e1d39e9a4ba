package settings_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// disableActions are the workspace's api_client.disable_webhooks events,
// by client, oldest first.
func disableActions(t *testing.T, h *servertest.Harness, ws string) []string {
	t.Helper()
	wsID, _ := opaqueid.Parse(opaqueid.Workspace, ws)
	rows, err := dbtest.Raw(t, h.DB).Query(context.Background(),
		`SELECT client_id FROM audit_events WHERE workspace_id = $1 AND action = 'api_client.disable_webhooks' ORDER BY id`, wsID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, opaqueid.Format(opaqueid.Client, id))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConfirmationsOfferToDisableWebhooksInBrowser: in chromium, the
// "Rotate secret" and "Revoke" confirmations list the client's webhook
// endpoints (URL and status, in a table named "Webhook endpoints") above a
// checkbox "Disable its webhook endpoints", checked. Rotating with it
// checked disables every endpoint of the client (credentials_revoked) in
// the rotation, audited; cleared by keyboard, the rotation leaves them
// enabled. On Revoke, which disables them for good anyway
// (client_revoked), the box is checked and cannot be cleared. axe-core
// checks both pages. Before, the confirmations said nothing of the
// endpoints, and an endpoint made with a leaked secret kept receiving
// after the rotation.
func TestConfirmationsOfferToDisableWebhooksInBrowser(t *testing.T) {
	ctx := newBrowserTab(t)
	axe := axeSource(t)
	h := servertest.New(t)
	ws, member := h.Workspace("Leak Browser")
	b := tab{t: t, ctx: ctx}
	b.open(signInLink(t, h, member, 0))
	b.waitHeading("API clients")

	box := func() (checked, disabled bool) {
		t.Helper()
		var state []bool
		if err := json.Unmarshal(b.call(b.find("checkbox", "Disable its webhook endpoints"), `function () { return [this.checked, this.disabled]; }`), &state); err != nil {
			t.Fatal(err)
		}
		return state[0], state[1]
	}
	rows := func() []string {
		t.Helper()
		if !b.has("table", "Webhook endpoints") {
			t.Fatal(`no table named "Webhook endpoints" on the confirmation`)
		}
		return evalIn[[]string](b, `[...document.querySelectorAll("table tbody tr")].map(r => [...r.cells].map(c => c.textContent.trim()).join(" | "))`)
	}

	// Rotate, with the box as it comes: checked.
	leaked, _ := h.Client(ws, member, "contacts:read")
	thief := seedEndpoint(t, h, ws, leaked, "https://thief.example/collect")
	paused := seedEndpoint(t, h, ws, leaked, "https://hooks.example.com/paused")
	if _, err := dbtest.Raw(t, h.DB).Exec(context.Background(), `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'manual' WHERE id = $1`, paused); err != nil {
		t.Fatal(err)
	}
	b.open(h.Admin.URL + "/settings/clients/" + leaked + "/rotate")
	b.waitHeading("Rotate the secret of " + "test client" + "?")
	want := []string{"https://thief.example/collect | enabled", "https://hooks.example.com/paused | disabled (manual)"}
	if got := rows(); !slices.Equal(got, want) {
		t.Fatalf("the rotation's confirmation lists %q, want %q", got, want)
	}
	if checked, disabled := box(); !checked || disabled {
		t.Fatalf("Disable its webhook endpoints: checked %v, disabled %v; want checked and changeable", checked, disabled)
	}
	b.axe(axe, "the rotation's confirmation")
	b.click("button", "Rotate secret")
	b.waitHeading("Secret rotated")
	for _, id := range []uuid.UUID{thief, paused} {
		if got := endpointStatus(t, h, id); got != "disabled credentials_revoked" {
			t.Errorf("an endpoint after Rotate secret with the box checked: %q, want disabled credentials_revoked", got)
		}
	}

	// Cleared by keyboard: the rotation leaves the endpoints enabled.
	kept, _ := h.Client(ws, member, "contacts:read")
	own := seedEndpoint(t, h, ws, kept, "https://hooks.example.com/own")
	b.open(h.Admin.URL + "/settings/clients/" + kept + "/rotate")
	b.waitHeading("Rotate the secret of " + "test client" + "?")
	b.call(b.find("checkbox", "Disable its webhook endpoints"), `function () { this.focus(); }`)
	b.run("clear the box", chromedp.KeyEvent(" "))
	if checked, _ := box(); checked {
		t.Fatal("Space did not clear Disable its webhook endpoints")
	}
	b.click("button", "Rotate secret")
	b.waitHeading("Secret rotated")
	if got := endpointStatus(t, h, own); got != "enabled" {
		t.Errorf("an endpoint after Rotate secret with the box cleared: %q, want enabled", got)
	}

	// Revoke: listed, the box checked for good.
	revoked, _ := h.Client(ws, member, "contacts:read")
	gone := seedEndpoint(t, h, ws, revoked, "https://thief.example/revoked")
	b.open(h.Admin.URL + "/settings/clients/" + revoked + "/revoke")
	b.waitHeading("Revoke " + "test client" + "?")
	if got := rows(); !slices.Equal(got, []string{"https://thief.example/revoked | enabled"}) {
		t.Fatalf("the revocation's confirmation lists %q", got)
	}
	if checked, disabled := box(); !checked || !disabled {
		t.Fatalf("Disable its webhook endpoints on Revoke: checked %v, disabled %v; want checked for good", checked, disabled)
	}
	if !strings.Contains(b.html(), "disables every webhook endpoint of the client for good") {
		t.Error("the revocation's confirmation does not say that revoking disables the endpoints")
	}
	b.axe(axe, "the revocation's confirmation")
	b.click("button", "Revoke")
	b.waitPage("test client", "The client is revoked")
	if got := endpointStatus(t, h, gone); got != "disabled client_revoked" {
		t.Errorf("an endpoint after Revoke: %q, want disabled client_revoked", got)
	}

	if got, want := disableActions(t, h, ws), []string{leaked, revoked}; !slices.Equal(got, want) {
		t.Errorf("api_client.disable_webhooks audited for %v, want %v", got, want)
	}
}
