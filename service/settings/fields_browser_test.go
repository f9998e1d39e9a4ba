package settings_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// TestCustomFieldsPageInBrowser: in chromium, the "Custom fields" page
// lists both objects' definitions; "Add custom field" refuses a bad key
// and a select without options with each error next to its field, then
// adds a select field whose options are typed one a line; "Edit" changes
// its label, adds an option and makes it required, and refuses removing
// an option a record holds (with how many); "Delete" asks first, and the
// field is gone. Every page is axe-clean, and each change is in the audit
// log with the member as actor.
func TestCustomFieldsPageInBrowser(t *testing.T) {
	ctx := newBrowserTab(t)
	axe := axeSource(t)
	h := servertest.New(t)
	ws, member := h.Workspace("Fields Browser")
	b := tab{t: t, ctx: ctx}
	setValue := func(role, name, value string) {
		t.Helper()
		v, _ := json.Marshal(value)
		b.call(b.find(role, name), `function () { this.value = `+string(v)+`; }`)
	}
	rows := func(table string) []string {
		return evalIn[[]string](b, `[...document.querySelectorAll("#`+table+` tbody tr")].map(r => r.innerText.replace(/\s+/g, " ").trim())`)
	}

	b.open(signInLink(t, h, member, 0))
	b.waitHeading("API clients")
	b.click("link", "Custom fields")
	b.waitHeading("Custom fields")
	if !b.has("table", "Contact fields") || !b.has("table", "Lead fields") {
		t.Fatal("no tables named Contact fields and Lead fields")
	}
	if got := rows("lead-fields"); len(got) != 1 || got[0] != "No custom fields yet." {
		t.Fatalf("empty lead fields: %v", got)
	}
	b.axe(axe, "the custom fields page")

	b.click("link", "Add custom field")
	b.waitHeading("Add custom field")
	for _, f := range [][2]string{{"combobox", "Object"}, {"textbox", "Key"}, {"textbox", "Label"}, {"combobox", "Type"}, {"textbox", "Options"}, {"textbox", "Description"}, {"checkbox", "Required: every record must hold a value"}} {
		b.find(f[0], f[1])
	}
	b.axe(axe, "the add form")
	setValue("combobox", "Object", "lead")
	setValue("textbox", "Key", "Budget band")
	setValue("textbox", "Label", "Budget band")
	setValue("combobox", "Type", "select")
	b.click("button", "Add custom field")
	b.waitFor("the errors", `document.getElementById("key-error") !== null && document.getElementById("options-error") !== null`)
	described := evalIn[string](b, `(() => { const f = document.getElementById("key"); return f.getAttribute("aria-invalid") + " " + f.getAttribute("aria-describedby"); })()`)
	if described != "true key-error key-hint" {
		t.Fatalf("the Key field: %q, want aria-invalid and its error next to it", described)
	}
	if b.value("textbox", "Label") != "Budget band" || b.value("combobox", "Object") != "lead" || b.value("combobox", "Type") != "select" {
		t.Fatal("the form lost what was typed")
	}
	b.axe(axe, "the add form with errors")

	setValue("textbox", "Key", "budget_band")
	setValue("textbox", "Options", "low: Under 1,000\nhigh: Over 10,000\n")
	b.click("button", "Add custom field")
	b.waitPage("Custom fields", "The custom field is added.")
	if got := rows("lead-fields"); len(got) != 1 || got[0] != "Budget band budget_band select Under 1,000 (low), Over 10,000 (high) No Edit Delete" {
		t.Fatalf("lead fields after the add: %v", got)
	}
	b.axe(axe, "the custom fields page with a field")

	// A record holds "high": removing it is refused, with the count.
	res, err := h.AdminClient.ListCustomFields(context.Background(), connect.NewRequest(&adminv1.ListCustomFieldsRequest{WorkspaceId: ws}))
	if err != nil || len(res.Msg.GetCustomFields()) != 1 {
		t.Fatalf("list: %v %v", res, err)
	}
	field := res.Msg.GetCustomFields()[0]
	wsID, _ := opaqueid.Parse(opaqueid.Workspace, ws)
	raw := dbtest.Raw(t, h.DB)
	contact := opaqueid.New()
	if _, err := raw.Exec(context.Background(), `INSERT INTO contacts (workspace_id, id, email, created_at, updated_at) VALUES ($1, $2, 'p@example.com', now(), now())`, wsID, contact); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(context.Background(), `INSERT INTO leads (workspace_id, id, contact_id, title, status, created_at, updated_at, custom_fields)
		VALUES ($1, gen_random_uuid(), $2, 'L', 'new', now(), now(), '{"budget_band": "high"}')`, wsID, contact); err != nil {
		t.Fatal(err)
	}
	b.click("link", "Edit Budget band")
	b.waitHeading("Edit custom field")
	if b.has("textbox", "Key") || b.has("combobox", "Type") {
		t.Fatal("the edit form offers the key or the type, which never change")
	}
	if got := b.value("textbox", "Options"); got != "low: Under 1,000\nhigh: Over 10,000" {
		t.Fatalf("the options box holds %q", got)
	}
	b.axe(axe, "the edit form")
	setValue("textbox", "Options", "low: Under 1,000")
	b.click("button", "Save custom field")
	b.waitFor("the options' error", `document.getElementById("options-error") !== null`)
	if msg := evalIn[string](b, `document.getElementById("options-error").textContent`); !strings.HasPrefix(msg, "1 records hold an option you removed") {
		t.Fatalf("options error %q", msg)
	}
	setValue("textbox", "Label", "Budget")
	setValue("textbox", "Options", "low: Small\nhigh: Over 10,000\nmid: Medium")
	b.call(b.find("checkbox", "Required: every record must hold a value"), `function () { this.checked = true; }`)
	b.click("button", "Save custom field")
	b.waitPage("Custom fields", "The custom field is saved.")
	if got := rows("lead-fields"); len(got) != 1 || got[0] != "Budget budget_band select Small (low), Over 10,000 (high), Medium (mid) Yes Edit Delete" {
		t.Fatalf("lead fields after the edit: %v", got)
	}

	b.click("link", "Delete Budget")
	b.waitHeading("Delete Budget?")
	b.find("link", "Cancel")
	b.axe(axe, "the delete confirmation")
	b.click("button", "Delete")
	b.waitPage("Custom fields", "The custom field is deleted")
	if got := rows("lead-fields"); len(got) != 1 || got[0] != "No custom fields yet." {
		t.Fatalf("lead fields after the delete: %v", got)
	}
	res, err = h.AdminClient.ListCustomFields(context.Background(), connect.NewRequest(&adminv1.ListCustomFieldsRequest{WorkspaceId: ws}))
	if err != nil || len(res.Msg.GetCustomFields()) != 0 {
		t.Fatalf("list after the delete: %v %v", res, err)
	}

	memberID, _ := opaqueid.Parse(opaqueid.Member, member)
	dbRows, err := raw.Query(context.Background(), `SELECT action || ' ' || outcome FROM audit_events
		WHERE workspace_id = $1 AND actor_member_id = $2 AND action LIKE 'custom_field.%' AND (target_id = $3 OR target_id IS NULL) ORDER BY id`,
		wsID, memberID, field.GetId())
	if err != nil {
		t.Fatal(err)
	}
	defer dbRows.Close()
	var audit []string
	for dbRows.Next() {
		var a string
		if err := dbRows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		audit = append(audit, a)
	}
	if want := "custom_field.create succeeded,custom_field.update succeeded,custom_field.delete succeeded"; strings.Join(audit, ",") != want {
		t.Fatalf("audit %v, want %s", audit, want)
	}
}
