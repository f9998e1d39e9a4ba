package lead_test

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
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// defineField creates a custom field of ws for a test (the definitions
// API is built elsewhere) and forgets the cached definitions.
func defineField(t *testing.T, h *servertest.Harness, ws, object, key, typ string, required bool, options ...string) {
	t.Helper()
	w, ok := opaqueid.Parse(opaqueid.Workspace, ws)
	if !ok {
		t.Fatalf("workspace id %q", ws)
	}
	arg := dbsqlc.CustomFieldCreateParams{WorkspaceID: w, ID: uuid.New(), Object: object, Key: key, Label: key, Type: typ, Required: required}
	if len(options) > 0 {
		var opts []customfield.Option
		for _, o := range options {
			opts = append(opts, customfield.Option{Value: o, Label: o})
		}
		arg.Options, _ = json.Marshal(opts)
	}
	if _, err := db.Q.CustomFieldCreate(context.Background(), h.DB.Conn(), arg); err != nil {
		t.Fatal(err)
	}
	customfield.Forget(w)
}

// TestLeadCustomValues: a lead's values and its inline contact's are
// stored on create (single and batch, where one bad value fails that item
// alone), answered, carried by the lead.created event, patched per key,
// and checked against the lead's and the contact's fields respectively.
func TestLeadCustomValues(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Lead Values Co")
	defineField(t, h, tn.WorkspaceID, "lead", "budget", "number", true)
	defineField(t, h, tn.WorkspaceID, "lead", "interest", "multiselect", false, "crm", "api", "sso")
	defineField(t, h, tn.WorkspaceID, "contact", "tier", "select", false, "gold", "silver")

	s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
		`{"contact":{"email":"l@x.co","customFields":{"tier":"gold"}},"customFields":{"budget":2500,"interest":["sso","crm"]}}`)
	if s != 201 || !strings.Contains(string(b), `"customFields":{"budget":2500,"interest":["crm","sso"]}`) {
		t.Fatalf("create: %d %s", s, b)
	}
	lead := servertest.Decode(t, b)
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts/"+lead["contactId"].(string), tn.Token, "", ""); s != 200 ||
		!strings.Contains(string(b), `"customFields":{"tier":"gold"}`) {
		t.Errorf("the inline contact: %d %s", s, b)
	}
	// The feed shows a change once it has passed its watermark: read
	// again until then.
	if s, b := eventsUntil(t, h, tn.Token, "/api/v1/events?types=lead.created", `"customFields":{"budget":2500,"interest":["crm","sso"]}`); s != 200 ||
		!strings.Contains(string(b), `"customFields":{"budget":2500,"interest":["crm","sso"]}`) {
		t.Errorf("lead.created: %d %s", s, b)
	}

	for _, c := range []struct{ body, field, code string }{
		{`{"contact":{"email":"m@x.co"}}`, "customFields.budget", "required"},
		{`{"contact":{"email":"m@x.co"},"customFields":{"budget":1,"tier":"gold"}}`, "customFields.tier", "unknown_member"},
		{`{"contact":{"email":"m@x.co","customFields":{"tier":"bronze"}},"customFields":{"budget":1}}`, "contact.customFields.tier", "invalid_value"},
		{`{"contact":{"email":"m@x.co","customFields":{"budget":1}},"customFields":{"budget":1}}`, "contact.customFields.budget", "unknown_member"},
	} {
		s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", c.body)
		if s/100 != 4 || !strings.Contains(string(b), `"field":"`+c.field+`","code":"`+c.code+`"`) {
			t.Errorf("%s: %d %s, want %s %s", c.body, s, b, c.field, c.code)
		}
	}

	s, _, b = h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json",
		`{"leads":[{"contact":{"email":"b1@x.co","customFields":{"tier":"silver"}},"customFields":{"budget":1}},
		           {"contact":{"email":"b2@x.co"},"customFields":{"budget":"x"}},
		           {"contact":{"email":"b3@x.co"},"customFields":{"budget":3,"interest":["api"]}}]}`)
	var r struct {
		Results []struct {
			Lead  map[string]any `json:"lead"`
			Error map[string]any `json:"error"`
		} `json:"results"`
	}
	servertest.MustUnmarshal(t, b, &r)
	if s != 200 || len(r.Results) != 3 || r.Results[0].Lead == nil || r.Results[1].Error == nil || r.Results[2].Lead == nil ||
		!strings.Contains(string(b), `"customFields":{"budget":3,"interest":["api"]}`) {
		t.Fatalf("batch: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts/"+r.Results[0].Lead["contactId"].(string), tn.Token, "", ""); s != 200 ||
		!strings.Contains(string(b), `"customFields":{"tier":"silver"}`) {
		t.Errorf("batch item's inline contact: %d %s", s, b)
	}

	path := "/api/v1/leads/" + lead["id"].(string)
	h.WaitPastStamp(t, lead["updatedAt"].(string))
	if s, _, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", `{"customFields":{"interest":null}}`); s != 200 ||
		!strings.Contains(string(b), `"customFields":{"budget":2500}`) {
		t.Errorf("patch: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", `{"customFields":{"budget":null}}`); s != 422 ||
		!strings.Contains(string(b), `"field":"customFields.budget","code":"required"`) {
		t.Errorf("clearing a required value: %d %s", s, b)
	}
	// The feed shows a change once it has passed its watermark: read
	// again until then.
	if s, b := eventsUntil(t, h, tn.Token, "/api/v1/events?types=lead.updated", `"changedFields":["customFields.interest","updatedAt"]`); s != 200 ||
		!strings.Contains(string(b), `"changedFields":["customFields.interest","updatedAt"]`) {
		t.Errorf("lead.updated: %d %s", s, b)
	}
}

// eventsUntil reads the events page at path until it holds want (or 10 s
// have passed), and answers the last read: a change shows in the feed
// once it has passed the feed's watermark.
func eventsUntil(t *testing.T, h *servertest.Harness, token, path, want string) (int, []byte) {
	t.Helper()
	var s int
	var b []byte
	dbtest.Until(10*time.Second, func() bool {
		s, _, b = h.Do(http.MethodGet, path, token, "", "")
		return s == 200 && strings.Contains(string(b), want)
	})
	return s, b
}

// TestCreatedValuesAnswerAsStored: a create answers its values as a read
// of the stored lead does, the ones the checks normalise included (text
// trimmed, an email lower-cased, a datetime in UTC, options in their
// order, -0 as 0), though the create no longer decodes what it stored;
// and a replay under the same Idempotency-Key, single or batch, answers
// the same values again (a batch's stored answer writes them itself).
func TestCreatedValuesAnswerAsStored(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Answered Values Co")
	defineField(t, h, tn.WorkspaceID, "lead", "notes", "text", false)
	defineField(t, h, tn.WorkspaceID, "lead", "billing", "email", false)
	defineField(t, h, tn.WorkspaceID, "lead", "call_at", "datetime", false)
	defineField(t, h, tn.WorkspaceID, "lead", "channels", "multiselect", false, "email", "phone", "sms")
	defineField(t, h, tn.WorkspaceID, "lead", "budget", "number", false)
	defineField(t, h, tn.WorkspaceID, "lead", "zero", "number", false)
	defineField(t, h, tn.WorkspaceID, "lead", "yes", "boolean", false)
	values := `{"notes":"  Wants a demo  ","billing":"Billing@Example.COM","call_at":"2026-12-01T10:30:00+01:00",` +
		`"channels":["sms","email"],"budget":25000.5,"zero":-0,"yes":true}`
	want := `"customFields":{"billing":"billing@example.com","budget":25000.5,"call_at":"2026-12-01T09:30:00Z",` +
		`"channels":["email","sms"],"notes":"Wants a demo","yes":true,"zero":0}`
	values2 := `{"notes":"plain","budget":-3}`
	want2 := `"customFields":{"budget":-3,"notes":"plain"}`

	// A single create, its read, and its replay.
	body := `{"contact":{"email":"v@x.co"},"customFields":` + values + `}`
	s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", body, "Idempotency-Key", "one")
	if s != 201 || !strings.Contains(string(b), want) {
		t.Fatalf("create: %d %s\nwant %s", s, b, want)
	}
	first := b
	id := servertest.ID(t, b)
	if s, _, b := h.Do(http.MethodGet, "/api/v1/leads/"+id, tn.Token, "", ""); s != 200 || !strings.Contains(string(b), want) {
		t.Errorf("read: %d %s", s, b)
	}
	s, hd, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", body, "Idempotency-Key", "one")
	if s != 201 || hd.Get("Idempotent-Replayed") != "true" || string(b) != string(first) {
		t.Errorf("replay: %d %q\n%s\nfirst\n%s", s, hd.Get("Idempotent-Replayed"), b, first)
	}

	// A batch, its reads, and its replay.
	body = `{"leads":[{"contact":{"email":"b1@x.co"},"customFields":` + values + `},{"contact":{"email":"b2@x.co"}},` +
		`{"contact":{"email":"b3@x.co"},"customFields":` + values2 + `}]}`
	s, _, b = h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", body, "Idempotency-Key", "batch")
	var r struct {
		Results []struct {
			Lead map[string]any `json:"lead"`
		} `json:"results"`
	}
	servertest.MustUnmarshal(t, b, &r)
	if s != 200 || len(r.Results) != 3 || !strings.Contains(string(b), want) || !strings.Contains(string(b), want2) ||
		r.Results[1].Lead == nil || r.Results[1].Lead["customFields"] != nil {
		t.Fatalf("batch: %d %s", s, b)
	}
	first = b
	for i, w := range map[int]string{0: want, 2: want2} {
		if s, _, b := h.Do(http.MethodGet, "/api/v1/leads/"+r.Results[i].Lead["id"].(string), tn.Token, "", ""); s != 200 || !strings.Contains(string(b), w) {
			t.Errorf("read of item %d: %d %s", i, s, b)
		}
	}
	s, hd, b = h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", body, "Idempotency-Key", "batch")
	if s != 200 || hd.Get("Idempotent-Replayed") != "true" || !jsonEqual(t, b, first) {
		t.Errorf("batch replay: %d %q\n%s\nfirst\n%s", s, hd.Get("Idempotent-Replayed"), b, first)
	}
}

// jsonEqual reports whether two JSON documents hold the same values.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	servertest.MustUnmarshal(t, a, &x)
	servertest.MustUnmarshal(t, b, &y)
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// TestAPatchDuringTheErasureKeepsTheValueErased: a PATCH that read a lead
// before the erasure removed a deleted field's value, and wrote after it,
// does not write the value back. The erasure keeps the lead's change_xid
// (nothing a partner sees changes), so the PATCH's write, conditional on
// it, goes through: it wrote the values as it had read them, and the
// deleted field's value was back in storage once the walk had passed the
// lead, to be answered again under a new field of the same key. Both a
// PATCH of other members and one of a live field's value are tried.
func TestAPatchDuringTheErasureKeepsTheValueErased(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Erase Race Co")
	defineField(t, h, tn.WorkspaceID, "lead", "keep", "text", false)
	defineField(t, h, tn.WorkspaceID, "lead", "gone", "text", false)
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	raw := dbtest.Raw(t, h.DB)
	ctx := context.Background()
	var goneID uuid.UUID
	if err := raw.QueryRow(ctx, `SELECT id FROM custom_fields WHERE workspace_id = $1 AND key = 'gone'`, ws).Scan(&goneID); err != nil {
		t.Fatal(err)
	}
	var leads []string
	for i, values := range []string{`{"keep":"k","gone":"g"}`, `{"keep":"k","gone":"g"}`, `{"gone":"g"}`} {
		s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
			`{"contact":{"email":"race`+string(rune('a'+i))+`@x.co"},"customFields":`+values+`}`)
		if s != 201 {
			t.Fatalf("create: %d %s", s, b)
		}
		leads = append(leads, servertest.ID(t, b))
	}
	if n, err := db.Q.CustomFieldMarkDeleted(ctx, h.DB.Conn(), dbsqlc.CustomFieldMarkDeletedParams{WorkspaceID: ws, ID: goneID}); err != nil || n != 1 {
		t.Fatalf("delete the field: %d %v", n, err)
	}
	customfield.Forget(ws)
	for i, patch := range []string{`{"message":"later"}`, `{"customFields":{"keep":"k2"}}`} {
		id, _ := opaqueid.Parse(opaqueid.Lead, leads[i])
		s, b, stored := h.PatchWhileErased(t, tn.Token, "leads", ws, id, "gone", "/api/v1/leads/"+leads[i], patch)
		if s != 200 {
			t.Fatalf("PATCH %s: %d %s", patch, s, b)
		}
		if strings.Contains(string(stored), `"gone"`) {
			t.Errorf("after PATCH %s during the erasure, the lead stores %s: the deleted field's value is back", patch, stored)
		}
		if !strings.Contains(string(stored), `"keep"`) {
			t.Errorf("after PATCH %s, the lead stores %s: the live value is lost", patch, stored)
		}
	}
	// Clearing the values of a lead that holds a deleted field's alone
	// changes nothing a partner sees, and so writes nothing: the same
	// ETag, no new updatedAt.
	path := "/api/v1/leads/" + leads[2]
	_, before, _ := h.Do(http.MethodGet, path, tn.Token, "", "")
	s, after, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", `{"customFields":null}`)
	if s != 200 || after.Get("ETag") == "" || after.Get("ETag") != before.Get("ETag") {
		t.Errorf("clearing only a deleted field's value: %d, ETag %q, was %q: %s", s, after.Get("ETag"), before.Get("ETag"), b)
	}
}
