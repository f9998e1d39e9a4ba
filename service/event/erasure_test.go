package event_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// TestDeleteErasesEveryCopy: after a contact is deleted with its lead,
// its personal data is nowhere in its workspace's tables: not in a row,
// not in the stored idempotent answers that held it (a single create, a
// lead create, a batch whose item collided with it; a retry of such a key
// runs as a new request), not in its earlier events, which keep the id
// only; the feed has contact.deleted and lead.deleted. A second workspace
// with the same data keeps all of it.
func TestDeleteErasesEveryCopy(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Erase Co")
	other := h.NewTenant("Erase Elsewhere")
	const person = `{"email":"ada.erase@x.co","firstName":"Augusta","phone":"+14155550199"}`
	seed := func(tok string) (contact, lead string) {
		t.Helper()
		s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tok, "application/json", person, "Idempotency-Key", "c-1")
		if s != 201 {
			t.Fatalf("create contact: %d %s", s, b)
		}
		contact = servertest.ID(t, b)
		if s, _, b := h.Do(http.MethodPatch, "/api/v1/contacts/"+contact, tok, "application/merge-patch+json", `{"lastName":"Byron"}`); s != 200 {
			t.Fatalf("patch: %d %s", s, b)
		}
		s, _, b = h.Do(http.MethodPost, "/api/v1/leads", tok, "application/json",
			`{"contactId":"`+contact+`","title":"Engine for Augusta"}`, "Idempotency-Key", "l-1")
		if s != 201 {
			t.Fatalf("create lead: %d %s", s, b)
		}
		lead = servertest.ID(t, b)
		if s, _, b := h.Do(http.MethodPost, "/api/v1/contacts/batch", tok, "application/json",
			`{"contacts":[{"email":"ada.erase@x.co"},{"email":"someone@x.co"}]}`, "Idempotency-Key", "b-1"); s != 200 {
			t.Fatalf("batch: %d %s", s, b)
		}
		return contact, lead
	}
	contact, lead := seed(tn.Token)
	theirs, _ := seed(other.Token)

	if s, _, b := h.Do(http.MethodDelete, "/api/v1/contacts/"+contact+"?withLeads=true", tn.Token, "", ""); s != 204 {
		t.Fatalf("delete: %d %s", s, b)
	}

	raw := dbtest.Raw(t, h.DB)
	count := func(workspace, what, sql string, args ...any) int {
		t.Helper()
		ws, _ := opaqueid.Parse(opaqueid.Workspace, workspace)
		var n int
		if err := raw.QueryRow(context.Background(), sql, append([]any{ws}, args...)...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return n
	}
	checks := []struct{ what, sql string }{
		{"contacts", `SELECT count(*) FROM contacts WHERE workspace_id = $1 AND email = 'ada.erase@x.co'`},
		{"leads", `SELECT count(*) FROM leads WHERE workspace_id = $1 AND title = 'Engine for Augusta'`},
		{"stored answers", `SELECT count(*) FROM idempotency_keys WHERE workspace_id = $1 AND key IN ('c-1', 'l-1', 'b-1')`},
		{"stored answers with the data", `SELECT count(*) FROM idempotency_keys WHERE workspace_id = $1
			AND (coalesce(record::text, '') LIKE '%Augusta%' OR position(convert_to('Augusta', 'UTF8') IN coalesce(response, ''::bytea)) > 0)`},
		{"events with the data", `SELECT count(*) FROM events WHERE workspace_id = $1
			AND (object::text LIKE '%ada.erase%' OR object::text LIKE '%Augusta%' OR object::text LIKE '%14155550199%')`},
	}
	for _, c := range checks {
		if n := count(tn.WorkspaceID, c.what, c.sql); n != 0 {
			t.Errorf("%s: %d left after the delete", c.what, n)
		}
		if n := count(other.WorkspaceID, c.what, c.sql); n == 0 {
			t.Errorf("%s: the other workspace lost its own", c.what)
		}
	}

	// A transaction open anywhere in the cluster holds the feed back a
	// while (the watermark), so wait until the deletes have come through.
	var all []event
	var err error
	dbtest.Until(time.Minute, func() bool {
		all, _, err = feed(h, tn.Token, "", "", 100)
		deleted := 0
		for _, e := range all {
			if e.Type == "contact.deleted" || e.Type == "lead.deleted" {
				deleted++
			}
		}
		return err != nil || deleted >= 2
	})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	for _, e := range all {
		id := e.Data.Object["id"].(string)
		kinds[id] = append(kinds[id], e.Type)
		if (id == contact || id == lead) && len(e.Data.Object) != 1 {
			t.Errorf("%s of the deleted %s still holds %v", e.Type, id, e.Data.Object)
		}
	}
	if got := kinds[contact]; len(got) != 3 || got[0] != "contact.created" || got[1] != "contact.updated" || got[2] != "contact.deleted" {
		t.Errorf("the deleted contact's events: %v", got)
	}
	if got := kinds[lead]; len(got) != 2 || got[0] != "lead.created" || got[1] != "lead.deleted" {
		t.Errorf("the deleted lead's events: %v", got)
	}

	// The key's stored answer went with the data: a retry is a new create.
	s, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", person, "Idempotency-Key", "c-1")
	if s != 201 || hdr.Get("Idempotent-Replayed") != "" || servertest.ID(t, b) == contact {
		t.Errorf("retry of the erased key: %d %v %s", s, hdr, b)
	}
	// The other workspace's answer still replays.
	s, hdr, b = h.Do(http.MethodPost, "/api/v1/contacts", other.Token, "application/json", person, "Idempotency-Key", "c-1")
	if s != 201 || hdr.Get("Idempotent-Replayed") != "true" || servertest.ID(t, b) != theirs {
		t.Errorf("the other workspace's replay: %d %v %s", s, hdr, b)
	}
}

// TestErasureReachesCopiesInOtherLeads (issue 34, item 3): a lead made
// with an inline contact P1 and no title is titled after P1 ("Personone
// Erasable"); moved to contact P2, it keeps that title, and its events
// hold P1's name and id. Deleting P1 leaves none of it: the lead takes
// P2's default title, its earlier events lose their objects, its stored
// create answer goes; GET, the feed and the tables show no trace of P1. A
// second workspace with the same people keeps everything.
func TestErasureReachesCopiesInOtherLeads(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Erase Copies")
	other := h.NewTenant("Erase Copies Elsewhere")
	seed := func(tok string) (p1, p2, lead string) {
		t.Helper()
		s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tok, "application/json",
			`{"contact":{"email":"p1.erasable@x.co","firstName":"Personone","lastName":"Erasable","phone":"+14155550123"}}`,
			"Idempotency-Key", "lead-p1")
		if s != 201 {
			t.Fatalf("create lead: %d %s", s, b)
		}
		lead = servertest.ID(t, b)
		l := servertest.Decode(t, b)
		if l["title"] != "Personone Erasable" {
			t.Fatalf("default title %v", l["title"])
		}
		p1 = l["contactId"].(string)
		s, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tok, "application/json", `{"email":"p2.kept@x.co","firstName":"Persontwo"}`)
		if s != 201 {
			t.Fatalf("create contact: %d %s", s, b)
		}
		p2 = servertest.ID(t, b)
		if s, _, b := h.Do(http.MethodPatch, "/api/v1/leads/"+lead, tok, "application/merge-patch+json", `{"contactId":"`+p2+`"}`); s != 200 {
			t.Fatalf("move the lead: %d %s", s, b)
		}
		return p1, p2, lead
	}
	p1, _, lead := seed(tn.Token)
	theirP1, _, _ := seed(other.Token)
	if s, _, b := h.Do(http.MethodDelete, "/api/v1/contacts/"+p1, tn.Token, "", ""); s != 204 {
		t.Fatalf("delete P1: %d %s", s, b)
	}

	s, _, b := h.Do(http.MethodGet, "/api/v1/leads/"+lead, tn.Token, "", "")
	if s != 200 {
		t.Fatalf("get lead: %d %s", s, b)
	}
	if l := servertest.Decode(t, b); l["title"] != "Persontwo" {
		t.Errorf("the moved lead's title after P1's erasure: %v, want its own contact's default title", l["title"])
	}

	raw := dbtest.Raw(t, h.DB)
	traces := func(workspace, what string) int {
		t.Helper()
		ws, _ := opaqueid.Parse(opaqueid.Workspace, workspace)
		p1ID, _ := opaqueid.Parse(opaqueid.Contact, map[string]string{tn.WorkspaceID: p1, other.WorkspaceID: theirP1}[workspace])
		var n int
		q := map[string]string{
			"leads": `SELECT count(*) FROM leads WHERE workspace_id = $1 AND $2::text IS NOT NULL AND (title LIKE '%Personone%' OR title LIKE '%Erasable%')`,
			"events": `SELECT count(*) FROM events WHERE workspace_id = $1 AND (object::text LIKE '%Personone%'
				OR object::text LIKE '%p1.erasable%' OR object::text LIKE '%14155550123%' OR object::text LIKE '%' || $2::text || '%')`,
			"stored answers": `SELECT count(*) FROM idempotency_keys WHERE workspace_id = $1 AND (coalesce(record::text, '') LIKE '%Personone%'
				OR coalesce(record::text, '') LIKE '%' || $2::text || '%' OR position(convert_to('Personone', 'UTF8') IN coalesce(response, ''::bytea)) > 0)`,
		}[what]
		if err := raw.QueryRow(context.Background(), q, ws, p1ID.String()).Scan(&n); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return n
	}
	for _, what := range []string{"leads", "events", "stored answers"} {
		if n := traces(tn.WorkspaceID, what); n != 0 {
			t.Errorf("%s: %d still hold the erased contact", what, n)
		}
		if n := traces(other.WorkspaceID, what); n == 0 {
			t.Errorf("%s: the other workspace lost its own", what)
		}
	}

	// The feed, once the delete has come through: no event names P1 but
	// its own (id only), and the lead's last event carries P2's title.
	var all []event
	var err error
	dbtest.Until(time.Minute, func() bool {
		all, _, err = feed(h, tn.Token, "", "", 100)
		for _, e := range all {
			if e.Type == "contact.deleted" {
				return true
			}
		}
		return err != nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	for _, e := range all {
		o := e.Data.Object
		if o["id"] == p1 && len(o) != 1 {
			t.Errorf("%s of the erased contact holds %v", e.Type, o)
		}
		if o["contactId"] == p1 || o["title"] == "Personone Erasable" {
			t.Errorf("%s of %v still names the erased contact: %v", e.Type, o["id"], o)
		}
		if o["id"] == lead && len(o) > 1 {
			last = o
		}
	}
	if last == nil || last["title"] != "Persontwo" {
		t.Errorf("the lead's latest event: %v, want P2's title", last)
	}
}
