package settings_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/service/servertest"
)

// navigate runs an action that loads another page (a link, a form) and
// waits until the new page has loaded.
func (b tab) navigate(what string, act func()) {
	b.t.Helper()
	evalIn[bool](b, `window.__before = true`)
	act()
	b.waitFor(what, `!window.__before && document.querySelector("h1") !== null`)
}

// auditRows reads the audit log's rows as "action | actor | client".
func auditRows(b tab) []string {
	b.t.Helper()
	return evalIn[[]string](b, `[...document.querySelectorAll("tbody tr")].filter(r => r.cells.length > 1).map(r =>
		[1, 3, 4].map(i => r.cells[i].innerText.replace(/\s+/g, " ").trim()).join(" | "))`)
}

// countAction counts the rows of one action.
func countAction(rows []string, action string) int {
	n := 0
	for _, r := range rows {
		if strings.HasPrefix(r, action+" |") {
			n++
		}
	}
	return n
}

// TestAuditLogInBrowser (issue 36): in chromium, a log of 40 events,
// reads and changes mixed, shows the changes alone by default, newest
// first, with names beside the ids (the member's email, the client's
// name) and the API client as the actor of the webhook endpoint it made
// with its own token; the "Show", "Action", "Actor" and "Client" filters
// (a GET form) show the reads when asked, one action, one actor, one
// client; a bad filter is told next to its field; a long action name
// breaks between its words, never inside one; axe-clean.
func TestAuditLogInBrowser(t *testing.T) {
	ctx := newBrowserTab(t)
	axe := axeSource(t)
	h := servertest.New(t)
	bg := context.Background()
	ws, member := h.Workspace("Audit Browser") // workspace.create, member.add
	email := "admin@audit-browser.test"
	create := func(name string, scopes ...string) (string, string) {
		res, err := h.AdminClient.CreateApiClient(bg, connect.NewRequest(&adminv1.CreateApiClientRequest{WorkspaceId: ws, MemberId: member, Name: name, Scopes: scopes}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetClientId(), res.Msg.GetClientSecret()
	}
	create("Reporting sync", "contacts:read")
	zapier, _ := create("Zapier bridge", "leads:write")
	hooks, secret := create("Hook maker", "leads:read", "webhooks:read", "webhooks:write")
	// The client's own change, with its token.
	status, _, body := h.Do("POST", "/api/v1/webhook-endpoints", h.Token(hooks, secret, ""), "application/json",
		`{"url":"https://hooks.example.com/audit","eventTypes":["lead.created"]}`)
	if status != http.StatusCreated {
		t.Fatalf("create endpoint: status %d: %s", status, body)
	}
	for range 5 {
		if _, err := h.AdminClient.DeactivateApiClient(bg, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: zapier, MemberId: member})); err != nil {
			t.Fatal(err)
		}
		if _, err := h.AdminClient.ActivateApiClient(bg, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: zapier, MemberId: member})); err != nil {
			t.Fatal(err)
		}
	}
	// 24 reads among them: what the pages and the CLI list.
	for range 12 {
		clientCount(t, h, ws, member)
		if _, err := h.AdminClient.ListWebhookEndpoints(bg, connect.NewRequest(&adminv1.ListWebhookEndpointsRequest{WorkspaceId: ws, MemberId: member})); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := dbtest.Raw(t, h.DB).QueryRow(bg, `SELECT count(*) FROM audit_events e JOIN workspaces w ON w.id = e.workspace_id WHERE w.name = 'Audit Browser'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 40 {
		t.Fatalf("the seeded log has %d events, want 40", n)
	}

	// Signed in (member.create_sign_in_link by the operator,
	// settings.sign_in by the member): the changes alone, newest first.
	b := tab{t: t, ctx: ctx}
	b.open(signInLink(t, h, member, 0))
	b.waitHeading("API clients")
	b.navigate("the audit log", func() { b.click("link", "Audit log") })
	b.waitHeading("Audit log")
	rows := auditRows(b)
	if len(rows) != 18 {
		t.Fatalf("the default view has %d rows, want the 18 changes:\n%s", len(rows), strings.Join(rows, "\n"))
	}
	for _, r := range rows {
		if strings.Contains(r, ".list |") {
			t.Errorf("a read in the default view: %s", r)
		}
	}
	if !strings.HasPrefix(rows[0], "settings.sign_in | "+email+" mem_") || !strings.HasPrefix(rows[1], "member.create_sign_in_link | operator |") {
		t.Errorf("the log starts %q, %q: want the sign-in by %s, then the operator's link", rows[0], rows[1], email)
	}
	if countAction(rows, "webhook_endpoint.create") != 1 {
		t.Fatalf("no webhook_endpoint.create in %v", rows)
	}
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r, "webhook_endpoint.create |"):
			if !strings.HasPrefix(r, "webhook_endpoint.create | Hook maker API client "+hooks+" | Hook maker "+hooks) {
				t.Errorf("the client's own change: %q, want Hook maker (API client) as its actor", r)
			}
		case strings.HasPrefix(r, "api_client.deactivate |"):
			if r != "api_client.deactivate | "+email+" "+member+" | Zapier bridge "+zapier {
				t.Errorf("a deactivation: %q, want the member's email and the client's name beside their ids", r)
			}
		}
	}
	if got := b.value("combobox", "Show"); got != "changes" {
		t.Errorf("Show is %q by default, want changes", got)
	}
	b.axe(axe, "the audit log")

	// A long action name breaks between its words only: in a narrow
	// window each word of it is on one line.
	b.run("narrow the window", chromedp.EmulateViewport(420, 900))
	split := evalIn[[]string](b, `[...document.querySelectorAll("code.action")].flatMap(c => [...c.childNodes]
		.filter(n => n.nodeType === Node.TEXT_NODE)
		.filter(n => { const r = document.createRange(); r.selectNodeContents(n); return r.getClientRects().length > 1; })
		.map(n => c.textContent + ": " + n.textContent))`)
	wrapped := evalIn[int](b, `[...document.querySelectorAll("code.action")].filter(c => c.getClientRects().length > 1).length`)
	b.run("restore the window", chromedp.EmulateViewport(1200, 900))
	if len(split) > 0 {
		t.Errorf("action names broken inside a word: %v", split)
	}
	if wrapped == 0 {
		t.Errorf("no action name wrapped in a narrow window: the check saw nothing to check")
	}

	// Show: Changes and reads; the reads were recorded all along.
	b.call(b.find("combobox", "Show"), `function () { this.value = "all"; }`)
	b.navigate("the reads", func() { b.click("button", "Filter") })
	rows = auditRows(b)
	// The 40, the link and the sign-in, the clients page the sign-in
	// opened (api_client.list) and the first view of the log.
	if countAction(rows, "api_client.list") != 13 || countAction(rows, "webhook_endpoint.list") != 12 || countAction(rows, "audit_event.list") != 1 || len(rows) != 44 {
		t.Fatalf("changes and reads: %d rows, want 44:\n%s", len(rows), strings.Join(rows, "\n"))
	}
	if loc := evalIn[string](b, `location.search`); !strings.HasPrefix(loc, "?kind=all&") {
		t.Errorf("the filtered view's address is %q, want the filters in its query", loc)
	}

	// One action.
	b.call(b.find("combobox", "Action"), `function () { this.value = "api_client.deactivate"; }`)
	b.navigate("one action", func() { b.click("button", "Filter") })
	rows = auditRows(b)
	if len(rows) != 5 || countAction(rows, "api_client.deactivate") != 5 {
		t.Fatalf("action api_client.deactivate: %v", rows)
	}
	b.axe(axe, "the audit log filtered")

	// One actor: the API client, by its id.
	b.navigate("clear", func() { b.click("link", "Clear filters") })
	b.call(b.find("textbox", "Actor"), `function () { this.value = "`+hooks+`"; }`)
	b.navigate("one actor", func() { b.click("button", "Filter") })
	rows = auditRows(b)
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "webhook_endpoint.create | Hook maker API client") {
		t.Fatalf("actor %s: %v", hooks, rows)
	}

	// One client, whoever acted, by a link of a row: its name.
	b.navigate("clear", func() { b.click("link", "Clear filters") })
	b.navigate("a client's link", func() {
		evalIn[bool](b, `document.querySelector('td:nth-child(5) a[href*="client=`+zapier+`"]').click(), true`)
	})
	rows = auditRows(b)
	if len(rows) != 11 || countAction(rows, "api_client.create") != 1 || countAction(rows, "api_client.activate") != 5 {
		t.Fatalf("client %s: %d rows, want its create and 10 changes:\n%s", zapier, len(rows), strings.Join(rows, "\n"))
	}
	if got := b.value("textbox", "Client"); got != zapier {
		t.Errorf("the Client field says %q, want %s", got, zapier)
	}

	// A bad actor is told next to its field, and nothing is listed.
	b.call(b.find("textbox", "Actor"), `function () { this.value = "someone"; }`)
	b.navigate("a bad actor", func() { b.click("button", "Filter") })
	described := evalIn[string](b, `(() => { const f = document.getElementById("actor"); const e = document.getElementById(f.getAttribute("aria-describedby").split(" ")[0]); return f.getAttribute("aria-invalid") + " " + (e ? e.textContent : ""); })()`)
	if !strings.HasPrefix(described, "true Enter a member's id") {
		t.Fatalf("a bad actor: the Actor field says %q, want aria-invalid and its error next to it", described)
	}
	if rows := auditRows(b); len(rows) != 0 {
		t.Errorf("a bad filter lists %v", rows)
	}
	b.axe(axe, "the audit log with a bad filter")
}

// TestCreateFormShowsEveryErrorInBrowser (issue 36, item 2): the "Create
// API client" form sent with no name, a bad rate and no scope shows the
// three errors at once, each next to its field (aria-invalid and
// aria-describedby), axe-clean; before, it took three tries.
func TestCreateFormShowsEveryErrorInBrowser(t *testing.T) {
	ctx := newBrowserTab(t)
	axe := axeSource(t)
	h := servertest.New(t)
	ws, member := h.Workspace("Create Errors")
	b := tab{t: t, ctx: ctx}
	b.open(signInLink(t, h, member, 0))
	b.waitHeading("API clients")
	b.navigate("the create form", func() { b.click("link", "Create API client") })
	b.waitHeading("Create API client")
	b.call(b.find("spinbutton", "Read rate"), `function () { this.value = "0"; }`)
	b.navigate("the errors", func() { b.click("button", "Create API client") })
	b.waitHeading("Create API client")
	next := func(field string) string {
		return evalIn[string](b, `(() => { const f = document.getElementById("`+field+`");
			const e = document.getElementById(f.getAttribute("aria-describedby").split(" ")[0]);
			return (f.getAttribute("aria-invalid") || "") + " " + (e ? e.textContent : "") + " " + (e ? String(e.previousElementSibling === f) : ""); })()`)
	}
	if got := next("name"); !strings.HasPrefix(got, "true The name must be") || !strings.HasSuffix(got, " true") {
		t.Errorf("the Name field: %q, want aria-invalid and its error right after it", got)
	}
	if got := next("read-rate"); !strings.HasPrefix(got, "true Enter a whole number") || !strings.HasSuffix(got, " true") {
		t.Errorf("the Read rate field: %q, want aria-invalid and its error right after it", got)
	}
	scopes := evalIn[string](b, `(() => { const f = document.querySelector("fieldset"); const e = document.getElementById(f.getAttribute("aria-describedby"));
		return e && f.contains(e) ? e.textContent : ""; })()`)
	if scopes != "Choose at least one scope." {
		t.Errorf("the scopes say %q, want their error inside their fieldset", scopes)
	}
	if n := evalIn[int](b, `document.querySelectorAll(".error").length`); n != 3 {
		t.Errorf("%d errors on the page, want 3", n)
	}
	if got := b.value("spinbutton", "Read rate"); got != "0" {
		t.Errorf("the Read rate field holds %q, want what was sent (0)", got)
	}
	b.axe(axe, "the create form with three errors")
	if n := clientCount(t, h, ws, member); n != 0 {
		t.Fatalf("the refused form created %d clients", n)
	}

	// Corrected, the same form creates the client.
	b.call(b.find("textbox", "Name"), `function () { this.value = "Fixed"; }`)
	b.call(b.find("spinbutton", "Read rate"), `function () { this.value = "20"; }`)
	b.call(b.find("checkbox", "leads:read"), `function () { this.checked = true; }`)
	b.navigate("the secret", func() { b.click("button", "Create API client") })
	b.waitHeading("API client created")
}
