package contact_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// define creates a custom field of ws for a test (the definitions API is
// built elsewhere), and forgets the process's cached definitions.
func define(t *testing.T, h *servertest.Harness, ws, object, key, typ string, required bool, options ...string) {
	t.Helper()
	w := wsID(t, ws)
	arg := dbsqlc.CustomFieldCreateParams{WorkspaceID: w, ID: uuid.New(), Object: object, Key: key, Label: key, Type: typ, Required: required}
	if len(options) > 0 {
		var opts []customfield.Option
		for _, o := range options {
			opts = append(opts, customfield.Option{Value: o, Label: strings.ToUpper(o)})
		}
		arg.Options, _ = json.Marshal(opts)
	}
	if _, err := db.Q.CustomFieldCreate(context.Background(), h.DB.Conn(), arg); err != nil {
		t.Fatal(err)
	}
	customfield.Forget(w)
}

// wsID is the UUID of an opaque workspace id.
func wsID(t *testing.T, ws string) uuid.UUID {
	t.Helper()
	w, ok := opaqueid.Parse(opaqueid.Workspace, ws)
	if !ok {
		t.Fatalf("workspace id %q", ws)
	}
	return w
}

// defineAll gives ws one contact field of every type.
func defineAll(t *testing.T, h *servertest.Harness, ws string) {
	define(t, h, ws, "contact", "note", "text", false)
	define(t, h, ws, "contact", "budget", "number", false)
	define(t, h, ws, "contact", "vip", "boolean", false)
	define(t, h, ws, "contact", "born", "date", false)
	define(t, h, ws, "contact", "call_at", "datetime", false)
	define(t, h, ws, "contact", "tier", "select", false, "gold", "silver")
	define(t, h, ws, "contact", "topics", "multiselect", false, "a", "b", "c")
	define(t, h, ws, "contact", "site", "url", false)
	define(t, h, ws, "contact", "alt_email", "email", false)
}

// TestCustomValuesEachType: each type's valid value is stored as answered
// (trimmed text, a number kept exactly, a datetime in UTC, multiselect in
// the options' order, a lower-cased email) over REST; each wrong JSON type
// is a 400 invalid_format and each broken rule a 422 invalid_value, both
// naming customFields.<key>; an unknown key is a 400 unknown_member; and
// answers leave customFields out of a contact that holds none.
func TestCustomValuesEachType(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Values Co")
	defineAll(t, h, tn.WorkspaceID)

	s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"a@x.co","customFields":{
		"note":"  hello  ","budget":1234.5000,"vip":true,"born":"1990-02-03","call_at":"2026-05-01T11:30:00+02:00",
		"tier":"gold","topics":["c","a"],"site":"https://example.com/x","alt_email":"Ada@Example.COM"}}`)
	if s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	want := `{"alt_email":"ada@example.com","born":"1990-02-03","budget":1234.5,"call_at":"2026-05-01T09:30:00Z","note":"hello","site":"https://example.com/x","tier":"gold","topics":["a","c"],"vip":true}`
	if !strings.Contains(string(b), `"customFields":`+want) {
		t.Fatalf("create answered %s, want customFields %s", b, want)
	}
	id := servertest.ID(t, b)
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts/"+id, tn.Token, "", ""); s != 200 || !strings.Contains(string(b), `"customFields":`+want) {
		t.Errorf("GET: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts", tn.Token, "", ""); s != 200 || !strings.Contains(string(b), `"customFields":`+want) {
		t.Errorf("list: %d %s", s, b)
	}
	// Stored as answered.
	var stored string
	if err := h.DB.Conn().QueryRow(context.Background(), `SELECT custom_fields::text FROM contacts WHERE email = 'a@x.co'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !servertest.SameJSON(t, []byte(stored), []byte(want)) {
		t.Errorf("stored %s, want %s", stored, want)
	}

	// No values: no customFields member.
	s, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"none@x.co"}`)
	if s != 201 || strings.Contains(string(b), "customFields") {
		t.Errorf("create without values: %d %s", s, b)
	}

	for _, c := range []struct {
		value  string
		key    string
		status int
		code   string
	}{
		{`{"note":5}`, "note", 400, "invalid_format"},
		{`{"note":"` + strings.Repeat("x", 1001) + `"}`, "note", 422, "too_long"},
		{`{"note":"a\u202eb"}`, "note", 422, "invalid_format"},
		{`{"budget":"12"}`, "budget", 400, "invalid_format"},
		{`{"budget":1234567890123456}`, "budget", 422, "invalid_value"},
		{`{"vip":"yes"}`, "vip", 400, "invalid_format"},
		{`{"born":"03/02/1990"}`, "born", 422, "invalid_value"},
		{`{"born":"1990-02-30"}`, "born", 422, "invalid_value"},
		{`{"call_at":"2026-05-01 11:30"}`, "call_at", 422, "invalid_value"},
		{`{"tier":"bronze"}`, "tier", 422, "invalid_value"},
		{`{"tier":["gold"]}`, "tier", 400, "invalid_format"},
		{`{"topics":"a"}`, "topics", 400, "invalid_format"},
		{`{"topics":[]}`, "topics", 422, "invalid_value"},
		{`{"topics":["a","a"]}`, "topics", 422, "invalid_value"},
		{`{"topics":["z"]}`, "topics", 422, "invalid_value"},
		{`{"site":"ftp://example.com"}`, "site", 422, "invalid_value"},
		{`{"site":"/relative"}`, "site", 422, "invalid_value"},
		{`{"alt_email":"not-an-email"}`, "alt_email", 422, "invalid_format"},
		{`{"bogus":1}`, "bogus", 400, "unknown_member"},
	} {
		s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"bad@x.co","customFields":`+c.value+`}`)
		p := servertest.Decode(t, b)
		errs, _ := p["errors"].([]any)
		if s != c.status || len(errs) != 1 {
			t.Errorf("%s: %d %s, want %d", c.value, s, b, c.status)
			continue
		}
		if v := errs[0].(map[string]any); v["field"] != "customFields."+c.key || v["code"] != c.code {
			t.Errorf("%s: %s, want customFields.%s %s", c.value, b, c.key, c.code)
		}
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts?email=bad@x.co", tn.Token, "", ""); s != 200 || strings.Contains(string(b), "bad@x.co") {
		t.Errorf("a refused contact was written: %d %s", s, b)
	}

	// Over Connect JSON: google.protobuf.Value, the same checks.
	rpc := "/" + contactv1connect.ContactServiceName + "/CreateContact"
	s, _, b = h.Do(http.MethodPost, rpc, tn.Token, "application/json", `{"contact":{"email":"c@x.co","customFields":{"budget":7,"topics":["b"]}}}`,
		"Connect-Protocol-Version", "1")
	if s != 200 || !strings.Contains(string(b), `"customFields":{"budget":7,"topics":["b"]}`) {
		t.Errorf("Connect create: %d %s", s, b)
	}
	s, _, b = h.Do(http.MethodPost, rpc, tn.Token, "application/json", `{"contact":{"email":"d@x.co","customFields":{"budget":"7"}}}`,
		"Connect-Protocol-Version", "1")
	if s != 400 || !strings.Contains(string(b), `"field":"customFields.budget"`) || !strings.Contains(string(b), `"reason":"invalid_format"`) {
		t.Errorf("Connect create with a string for a number: %d %s", s, b)
	}
	s, _, b = h.Do(http.MethodPost, rpc, tn.Token, "application/json", `{"contact":{"email":"d@x.co","customFields":{"tier":"x"}}}`,
		"Connect-Protocol-Version", "1")
	if s != 400 || !strings.Contains(string(b), `"field":"customFields.tier"`) || !strings.Contains(string(b), `"reason":"invalid_value"`) {
		t.Errorf("Connect create with an unknown option: %d %s", s, b)
	}
}

// TestCustomValuesPatch: the merge patch works per key (a key sent is
// set, null clears it alone, customFields null clears all, {} changes
// nothing and writes no event); an update's event names
// customFields.<key>; a custom-only change moves updatedAt and shows in
// sync; a required field cleared is 422, while a record written before it
// became required keeps working; a deleted field's values are hidden;
// another workspace's definitions do not apply.
func TestCustomValuesPatch(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Patch Values Co")
	other := h.NewTenant("Patch Values Elsewhere")
	define(t, h, tn.WorkspaceID, "contact", "budget", "number", false)
	define(t, h, tn.WorkspaceID, "contact", "tier", "select", false, "gold", "silver")
	define(t, h, tn.WorkspaceID, "contact", "note", "text", false)
	// Workspace B's field of the same key, another type: not A's.
	define(t, h, other.WorkspaceID, "contact", "budget", "text", false)
	define(t, h, other.WorkspaceID, "contact", "only_b", "text", false)

	s, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json",
		`{"email":"p@x.co","customFields":{"budget":10,"tier":"gold","note":"n"}}`)
	if s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	id := servertest.ID(t, b)
	created := servertest.Decode(t, b)["updatedAt"]
	_ = hdr
	path := "/api/v1/contacts/" + id
	patch := func(body string) (int, []byte) {
		t.Helper()
		h.WaitPastStamp(t, created.(string))
		s, _, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", body)
		return s, b
	}
	if s, b := patch(`{"customFields":{"budget":null,"tier":"silver"}}`); s != 200 ||
		!strings.Contains(string(b), `"customFields":{"note":"n","tier":"silver"}`) || servertest.Decode(t, b)["updatedAt"] == created {
		t.Fatalf("patch one key, clear another: %d %s", s, b)
	}
	if s, b := patch(`{"customFields":{}}`); s != 200 || !strings.Contains(string(b), `"customFields":{"note":"n","tier":"silver"}`) {
		t.Errorf("patch {}: %d %s", s, b)
	}
	if s, b := patch(`{"customFields":{"tier":"silver"}}`); s != 200 {
		t.Errorf("patch to the same value: %d %s", s, b)
	}
	if s, b := patch(`{"customFields":{"only_b":"x"}}`); s != 400 || !strings.Contains(string(b), `"field":"customFields.only_b","code":"unknown_member"`) {
		t.Errorf("patch with B's key: %d %s", s, b)
	}
	if s, b := patch(`{"customFields":{"budget":"ten"}}`); s != 400 || !strings.Contains(string(b), `"field":"customFields.budget","code":"invalid_format"`) {
		t.Errorf("patch with a string for A's number: %d %s", s, b)
	}
	if s, b := patch(`{"customFields":null}`); s != 200 || strings.Contains(string(b), "customFields") {
		t.Errorf("patch customFields null: %d %s", s, b)
	}
	var stored *string
	if err := h.DB.Conn().QueryRow(context.Background(), `SELECT custom_fields::text FROM contacts WHERE email = 'p@x.co'`).Scan(&stored); err != nil || stored != nil {
		t.Errorf("after clearing all, the column is %v (%v), want NULL", stored, err)
	}

	// Events: the create carries the values, the first update names the
	// keys it changed; the no-op patches wrote none.
	// The feed shows a change once it has passed its watermark.
	dbtest.Until(10*time.Second, func() bool {
		s, _, b = h.Do(http.MethodGet, "/api/v1/events?types=contact.updated", tn.Token, "", "")
		return s == 200 && strings.Count(string(b), `"type":"contact.updated"`) >= 2
	})
	var ev struct {
		Events []struct {
			Data struct {
				ChangedFields []string       `json:"changedFields"`
				Object        map[string]any `json:"object"`
			} `json:"data"`
		} `json:"events"`
	}
	servertest.MustUnmarshal(t, b, &ev)
	if s != 200 || len(ev.Events) != 2 {
		t.Fatalf("events: %d %s, want 2 contact.updated", s, b)
	}
	if got := strings.Join(ev.Events[0].Data.ChangedFields, ","); got != "customFields.budget,customFields.tier,updatedAt" {
		t.Errorf("changedFields %q", got)
	}
	if cf, _ := ev.Events[0].Data.Object["customFields"].(map[string]any); cf["tier"] != "silver" || cf["budget"] != nil {
		t.Errorf("event object %v", ev.Events[0].Data.Object)
	}
	if got := strings.Join(ev.Events[1].Data.ChangedFields, ","); got != "customFields.note,customFields.tier,updatedAt" {
		t.Errorf("changedFields of clearing all %q", got)
	}
	if _, has := ev.Events[1].Data.Object["customFields"]; has {
		t.Errorf("event after clearing all carries customFields: %v", ev.Events[1].Data.Object)
	}

	// Sync: a custom-only change shows.
	s, _, b = h.Do(http.MethodGet, "/api/v1/contacts?sort=updatedAt", tn.Token, "", "")
	var page servertest.Page
	servertest.MustUnmarshal(t, b, &page)
	if s != 200 || page.Pagination.SyncCursor == nil {
		t.Fatalf("sync: %d %s", s, b)
	}
	if s, b := patch(`{"customFields":{"note":"again"}}`); s != 200 {
		t.Fatalf("patch: %d %s", s, b)
	}
	// The sync order shows the change once it has passed the feed's
	// watermark: read again until then.
	dbtest.Until(10*time.Second, func() bool {
		s, _, b = h.Do(http.MethodGet, "/api/v1/contacts?sort=updatedAt&cursor="+*page.Pagination.SyncCursor, tn.Token, "", "")
		return s == 200 && strings.Contains(string(b), id)
	})
	if s != 200 || !strings.Contains(string(b), id) || !strings.Contains(string(b), `"customFields":{"note":"again"}`) {
		t.Errorf("sync after a custom-only change: %d %s", s, b)
	}

	// Required: a record written before keeps working until a patch clears it.
	define(t, h, tn.WorkspaceID, "contact", "region", "text", true)
	if s, b := patch(`{"firstName":"P"}`); s != 200 {
		t.Errorf("patching a record without the new required field: %d %s", s, b)
	}
	if s, b := patch(`{"customFields":{"region":"EU"}}`); s != 200 {
		t.Errorf("setting it: %d %s", s, b)
	}
	if s, b := patch(`{"customFields":{"region":null}}`); s != 422 || !strings.Contains(string(b), `"field":"customFields.region","code":"required"`) {
		t.Errorf("clearing a required field: %d %s", s, b)
	}
	s, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"q@x.co"}`)
	if s != 422 || !strings.Contains(string(b), `"field":"customFields.region","code":"required"`) {
		t.Errorf("create without a required field: %d %s", s, b)
	}
	// B has no required field: its creates go on.
	if s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", other.Token, "application/json", `{"email":"q@x.co","customFields":{"budget":"ten"}}`); s != 201 ||
		!strings.Contains(string(b), `"customFields":{"budget":"ten"}`) {
		t.Errorf("B's create with its own text budget: %d %s", s, b)
	}

	// A deleted definition's values leave the answers at once.
	if _, err := h.DB.Conn().Exec(context.Background(),
		`UPDATE custom_fields SET deleted_at = now() WHERE workspace_id = $1 AND key = 'note'`, wsID(t, tn.WorkspaceID)); err != nil {
		t.Fatal(err)
	}
	customfield.Forget(wsID(t, tn.WorkspaceID))
	if s, _, b := h.Do(http.MethodGet, path, tn.Token, "", ""); s != 200 || strings.Contains(string(b), "again") || !strings.Contains(string(b), `"customFields":{"region":"EU"}`) {
		t.Errorf("GET after deleting note: %d %s", s, b)
	}
	// The feed's earlier events too (and so the webhooks', which render
	// the same body), although their stored rows still hold the value.
	dbtest.Until(10*time.Second, func() bool {
		s, _, b = h.Do(http.MethodGet, "/api/v1/events?types=contact.created,contact.updated", tn.Token, "", "")
		return s == 200 && strings.Contains(string(b), `"region":"EU"`)
	})
	if s != 200 || strings.Contains(string(b), `"note"`) || !strings.Contains(string(b), `"region":"EU"`) {
		t.Errorf("events after deleting note: %d %s", s, b)
	}

	// Erasure: deleting the contact takes its values with the row.
	if s, _, b := h.Do(http.MethodDelete, path, tn.Token, "", ""); s != 204 {
		t.Fatalf("delete: %d %s", s, b)
	}
	var n int
	if err := h.DB.Conn().QueryRow(context.Background(),
		`SELECT count(*) FROM events WHERE workspace_id = $1 AND object::text LIKE '%again%'`, wsID(t, tn.WorkspaceID)).Scan(&n); err != nil || n != 0 {
		t.Errorf("events still holding the erased values: %d (%v)", n, err)
	}
}

// TestCustomValuesBatch: one item with a bad value fails alone; the
// others are stored with theirs.
func TestCustomValuesBatch(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Batch Values Co")
	define(t, h, tn.WorkspaceID, "contact", "budget", "number", false)
	s, _, b := h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json",
		`{"contacts":[{"email":"a@x.co","customFields":{"budget":1}},{"email":"b@x.co","customFields":{"budget":"x"}},{"email":"c@x.co"}]}`)
	var r struct {
		Results []struct {
			Contact map[string]any `json:"contact"`
			Error   map[string]any `json:"error"`
		} `json:"results"`
	}
	servertest.MustUnmarshal(t, b, &r)
	if s != 200 || len(r.Results) != 3 || r.Results[0].Contact == nil || r.Results[1].Error == nil || r.Results[2].Contact == nil {
		t.Fatalf("batch: %d %s", s, b)
	}
	if cf, _ := r.Results[0].Contact["customFields"].(map[string]any); cf["budget"] != 1.0 {
		t.Errorf("item 0: %v", r.Results[0].Contact)
	}
	if _, has := r.Results[2].Contact["customFields"]; has {
		t.Errorf("item 2 carries customFields: %v", r.Results[2].Contact)
	}
	if !strings.Contains(string(b), `"field":"customFields.budget","code":"invalid_format"`) {
		t.Errorf("item 1's error does not name the value: %s", b)
	}
}

// TestAPatchDuringTheErasureKeepsTheValueErased is the lead test of the
// same name for contacts: a PATCH that read a contact before the erasure
// removed a deleted field's value, and wrote after it, does not write the
// value back (the erasure keeps change_xid, on which the write is
// conditional).
func TestAPatchDuringTheErasureKeepsTheValueErased(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Contact Erase Race Co")
	define(t, h, tn.WorkspaceID, "contact", "keep", "text", false)
	define(t, h, tn.WorkspaceID, "contact", "gone", "text", false)
	ws := wsID(t, tn.WorkspaceID)
	raw := dbtest.Raw(t, h.DB)
	ctx := context.Background()
	var goneID uuid.UUID
	if err := raw.QueryRow(ctx, `SELECT id FROM custom_fields WHERE workspace_id = $1 AND key = 'gone'`, ws).Scan(&goneID); err != nil {
		t.Fatal(err)
	}
	var contacts []string
	for i, values := range []string{`{"keep":"k","gone":"g"}`, `{"keep":"k","gone":"g"}`, `{"gone":"g"}`} {
		s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json",
			`{"email":"race`+string(rune('a'+i))+`@x.co","customFields":`+values+`}`)
		if s != 201 {
			t.Fatalf("create: %d %s", s, b)
		}
		contacts = append(contacts, servertest.ID(t, b))
	}
	if n, err := db.Q.CustomFieldMarkDeleted(ctx, h.DB.Conn(), dbsqlc.CustomFieldMarkDeletedParams{WorkspaceID: ws, ID: goneID}); err != nil || n != 1 {
		t.Fatalf("delete the field: %d %v", n, err)
	}
	customfield.Forget(ws)
	for i, patch := range []string{`{"firstName":"Later"}`, `{"customFields":{"keep":"k2"}}`} {
		id, _ := opaqueid.Parse(opaqueid.Contact, contacts[i])
		s, b, stored := h.PatchWhileErased(t, tn.Token, "contacts", ws, id, "gone", "/api/v1/contacts/"+contacts[i], patch)
		if s != 200 {
			t.Fatalf("PATCH %s: %d %s", patch, s, b)
		}
		if strings.Contains(string(stored), `"gone"`) {
			t.Errorf("after PATCH %s during the erasure, the contact stores %s: the deleted field's value is back", patch, stored)
		}
		if !strings.Contains(string(stored), `"keep"`) {
			t.Errorf("after PATCH %s, the contact stores %s: the live value is lost", patch, stored)
		}
	}
	// Clearing the values of a contact that holds a deleted field's alone
	// writes nothing: the same ETag.
	path := "/api/v1/contacts/" + contacts[2]
	_, before, _ := h.Do(http.MethodGet, path, tn.Token, "", "")
	s, after, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", `{"customFields":null}`)
	if s != 200 || after.Get("ETag") == "" || after.Get("ETag") != before.Get("ETag") {
		t.Errorf("clearing only a deleted field's value: %d, ETag %q, was %q: %s", s, after.Get("ETag"), before.Get("ETag"), b)
	}
}
