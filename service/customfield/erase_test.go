package customfield_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/customfield"
	"github.com/svat/partnerapi/service/servertest"
)

// TestDeletedFieldsValuesAreErasedInBoundedSteps: deleting a definition
// leaves its values in storage until the erasure, which removes the key
// from every record of the workspace and object in statements of at most
// the batch size (another key, another object's field of the same key and
// another workspace's records untouched; custom_fields NULL when nothing
// is left), writes no events, moves neither updated_at nor change_xid,
// and then removes the definition, freeing its key. A field deleted
// within the grace period is left alone.
func TestDeletedFieldsValuesAreErasedInBoundedSteps(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Fields Erase", allScopes...)
	other := newClient(h, "Fields Erase Other", allScopes...)
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	ws, otherWS := uid(t, opaqueid.Workspace, c.ws), uid(t, opaqueid.Workspace, other.ws)

	id, _ := create(t, h, c.token, `{"object":"contact","key":"budget","label":"Budget","type":"number"}`)
	create(t, h, c.token, `{"object":"contact","key":"tier","label":"Tier","type":"text"}`)
	leadField, _ := create(t, h, c.token, `{"object":"lead","key":"budget","label":"Budget","type":"number"}`)
	var contacts []uuid.UUID
	for _, email := range []string{"a@example.com", "b@example.com", "c@example.com", "d@example.com", "e@example.com"} {
		contacts = append(contacts, newContact(t, h, c.token, email))
	}
	exec(t, h, `UPDATE contacts SET custom_fields = '{"budget": 10, "tier": "gold"}' WHERE workspace_id = $1 AND id = $2`, ws, contacts[0])
	exec(t, h, `UPDATE contacts SET custom_fields = '{"budget": 20}' WHERE workspace_id = $1 AND id = ANY($2)`, ws, contacts[2:])
	// A lead holding the lead field of the same key (written directly: the
	// lead path is not this test's).
	exec(t, h, `INSERT INTO leads (workspace_id, id, contact_id, title, status, created_at, updated_at, custom_fields)
		VALUES ($1, gen_random_uuid(), $2, 'Lead', 'new', now(), now(), '{"budget": 30}')`, ws, contacts[1])
	otherContact := newContact(t, h, other.token, "o@example.com")
	exec(t, h, `UPDATE contacts SET custom_fields = '{"budget": 40}' WHERE workspace_id = $1 AND id = $2`, otherWS, otherContact)

	type state struct {
		xid     int64
		updated time.Time
	}
	before := map[uuid.UUID]state{}
	for _, con := range contacts {
		var s state
		if err := raw.QueryRow(ctx, `SELECT change_xid, updated_at FROM contacts WHERE workspace_id = $1 AND id = $2`, ws, con).Scan(&s.xid, &s.updated); err != nil {
			t.Fatal(err)
		}
		before[con] = s
	}
	var events int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM events WHERE workspace_id = $1`, ws).Scan(&events); err != nil {
		t.Fatal(err)
	}

	if status, _, b := h.Do(http.MethodDelete, path+"/"+id, c.token, "", ""); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, b)
	}
	// Within the grace period nothing is erased.
	r, more, err := customfield.Erase(ctx, h.DB, time.Now(), 2, 10)
	if err != nil || more || r.Batches != 0 {
		t.Fatalf("erase in the grace period: %+v, more %v, %v", r, more, err)
	}
	later := time.Now().Add(customfield.EraseGrace + time.Minute)
	// Bounded: one statement of two records per run; the six contacts of
	// the workspace take three statements and a fourth that finds none.
	var runs []customfield.EraseResult
	for range 10 {
		r, more, err := customfield.Erase(ctx, h.DB, later, 2, 1)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
		if r.Batches > 1 || r.Erased > 2 {
			t.Fatalf("run %d went past its bounds: %+v", len(runs), r)
		}
		if !more {
			break
		}
	}
	var erased, purged int64
	for _, r := range runs {
		erased, purged = erased+r.Erased, purged+r.Purged
	}
	if erased != 4 || purged != 1 {
		t.Errorf("runs %+v: erased %d, purged %d; want 4 and 1", runs, erased, purged)
	}

	got := map[uuid.UUID]*string{}
	for _, con := range contacts {
		var cf *string
		var s state
		if err := raw.QueryRow(ctx, `SELECT custom_fields::text, change_xid, updated_at FROM contacts WHERE workspace_id = $1 AND id = $2`, ws, con).
			Scan(&cf, &s.xid, &s.updated); err != nil {
			t.Fatal(err)
		}
		got[con] = cf
		if s != before[con] {
			t.Errorf("contact %s: change_xid/updated_at moved: %+v, was %+v", con, s, before[con])
		}
	}
	if got[contacts[0]] == nil || *got[contacts[0]] != `{"tier": "gold"}` {
		t.Errorf("the other key went too: %v", got[contacts[0]])
	}
	for _, con := range contacts[1:] {
		if got[con] != nil {
			t.Errorf("contact %s keeps %s, want NULL", con, *got[con])
		}
	}
	var leadValue, otherValue string
	if err := raw.QueryRow(ctx, `SELECT custom_fields::text FROM leads WHERE workspace_id = $1`, ws).Scan(&leadValue); err != nil || leadValue != `{"budget": 30}` {
		t.Errorf("the lead field's value: %q, %v", leadValue, err)
	}
	if err := raw.QueryRow(ctx, `SELECT custom_fields::text FROM contacts WHERE workspace_id = $1`, otherWS).Scan(&otherValue); err != nil || otherValue != `{"budget": 40}` {
		t.Errorf("another workspace's value: %q, %v", otherValue, err)
	}
	var eventsAfter, rows int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM events WHERE workspace_id = $1`, ws).Scan(&eventsAfter); err != nil || eventsAfter != events {
		t.Errorf("events %d, were %d (%v)", eventsAfter, events, err)
	}
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM custom_fields WHERE workspace_id = $1 AND id = $2`, ws, uid(t, opaqueid.Field, id)).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("definition rows %d (%v), want 0", rows, err)
	}
	// The key is free again.
	create(t, h, c.token, `{"object":"contact","key":"budget","label":"Budget","type":"text"}`)
	// A lead field's values go from the leads.
	if status, _, b := h.Do(http.MethodDelete, path+"/"+leadField, c.token, "", ""); status != http.StatusNoContent {
		t.Fatalf("delete the lead field: %d %s", status, b)
	}
	if r, _, err := customfield.Erase(ctx, h.DB, later, 2, 10); err != nil || r.Erased != 1 || r.Purged != 1 {
		t.Errorf("erase the lead field: %+v, %v", r, err)
	}
	var leadLeft *string
	if err := raw.QueryRow(ctx, `SELECT custom_fields::text FROM leads WHERE workspace_id = $1`, ws).Scan(&leadLeft); err != nil || leadLeft != nil {
		t.Errorf("the lead keeps %v (%v)", leadLeft, err)
	}
	// Nothing is left to do.
	if r, more, err := customfield.Erase(ctx, h.DB, later, 2, 10); err != nil || more || r.Batches != 0 {
		t.Errorf("erase with nothing to do: %+v, more %v, %v", r, more, err)
	}
}
