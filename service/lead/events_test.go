package lead

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestGroupEventsAreTheTriggers: the events lead_create_item_requests writes at
// the end of its statement (migration 00113) are the ones the statement
// triggers wrote for each request (the function before 00113, which sets no
// partner.defer_events): the same types, records and objects, in the same
// order, for every outcome of a single create; and a later statement of
// the same transaction still has its change folded into them.
func TestGroupEventsAreTheTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, err := os.ReadFile("../../db/migrations/00113_events_once_per_group.sql")
	if err != nil {
		t.Fatal(err)
	}
	down := strings.SplitN(string(src), "-- +goose Down", 2)[1]
	before := strings.SplitN(strings.SplitN(down, "-- +goose StatementBegin\n", 2)[1], "-- +goose StatementEnd", 2)[0]
	if strings.Contains(before, "defer_events") {
		t.Fatal("00113's Down does not restore the function of the triggers' way")
	}

	items := groupItems()
	dropped := groupItem(11) // inserts its contact, then loses its external id: removed, no event
	dropped.ContactEmail, dropped.ExternalID = ptr("c@example.com"), ptr("E1")
	items = append(items, dropped)

	events := func(d *db.DB) []string {
		t.Helper()
		budget := time.Second
		var last int64 // groupDB's own create: a random lead id
		if err := dbtest.Raw(t, d).QueryRow(ctx, "SELECT max(seq) FROM events").Scan(&last); err != nil {
			t.Fatal(err)
		}
		if err := d.WithTx(ctx, func(tx db.DBTX) error {
			if _, err := createRequests(ctx, tx, items, &budget); err != nil {
				return err
			}
			// A later statement of the transaction: folded into the
			// lead's created event by the trigger.
			_, err := tx.Exec(ctx, "UPDATE leads SET title = 'Renamed' WHERE id = $1", items[0].ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		rows, err := dbtest.Raw(t, d).Query(ctx, `
			SELECT type || ' ' || record_id || ' ' || coalesce((object - '{created_at,updated_at,change_xid}'::text[])::text, '-')
			       || ' ' || coalesce(changed::text, '-')
			FROM events WHERE seq > $1 ORDER BY change_xid, seq`, last)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}

	triggers := groupDB(t)
	if _, err := dbtest.Raw(t, triggers).Exec(ctx, before); err != nil {
		t.Fatalf("install the function of the triggers' way: %v", err)
	}
	want := events(triggers)
	got := events(groupDB(t))

	if len(got) != len(want) {
		t.Errorf("%d events, the triggers wrote %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("event %d:\n got  %s\n want %s", i, got[i], want[i])
		}
	}
	// The items cover what they are meant to: item 0 a new contact and
	// its lead, renamed; items 7 and 8 each a new contact and its lead;
	// items 1, 4, 9 and 10 a lead on a contact they found; no event for
	// the replay, the reused key, the taken external id, the unknown
	// contact, or the contact item 11 inserted and removed.
	var contacts, leads int
	for _, e := range want {
		switch {
		case strings.HasPrefix(e, "contact.created "):
			contacts++
		case strings.HasPrefix(e, "lead.created "):
			leads++
		default:
			t.Errorf("unexpected event %s", e)
		}
	}
	if contacts != 3 || leads != 7 || !strings.Contains(want[1], `"title": "Renamed"`) {
		t.Errorf("the items no longer cover the outcomes: %d contact and %d lead events\n%s", contacts, leads, strings.Join(want, "\n"))
	}
}

// TestSetEventsAreTheTriggers: since migration 00126 lead_create_item_set
// writes the events of the leads and contacts it creates itself (the
// leads' insert trigger is gone). The same batch, and the same items one
// at a time, leave the same events as lead_create_item_set of 00080 with the
// trigger put back (00126's Down): the same types, records, objects and
// order, none for a contact made for failed items only, and a contact
// that took a later item's fields carries them.
func TestSetEventsAreTheTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, err := os.ReadFile("../../db/migrations/00126_lead_events_without_a_trigger.sql")
	if err != nil {
		t.Fatal(err)
	}
	triggersWay := strings.SplitN(string(src), "-- +goose Down", 2)[1]
	if !strings.Contains(triggersWay, "CREATE TRIGGER leads_events_insert") || strings.Contains(triggersWay, "defer_events") {
		t.Fatal("00126's Down does not restore the trigger's way")
	}
	for _, batch := range []bool{true, false} {
		run := func(d *db.DB) []string {
			t.Helper()
			if _, err := createAlone(ctx, d.Conn(), shapeTaken()); err != nil {
				t.Fatal(err)
			}
			var last int64
			raw := dbtest.Raw(t, d)
			if err := raw.QueryRow(ctx, "SELECT max(seq) FROM events").Scan(&last); err != nil {
				t.Fatal(err)
			}
			sets := [][]dbsqlc.LeadCreateParams{shapeItems()}
			if !batch {
				sets = nil
				for _, it := range shapeItems() {
					sets = append(sets, []dbsqlc.LeadCreateParams{it})
				}
			}
			for _, items := range sets {
				if err := d.WithTx(ctx, func(tx db.DBTX) error {
					_, err := createSet(ctx, tx, groupWorkspace, items)
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			rows, err := raw.Query(ctx, `
				SELECT type || ' ' || record_id || ' ' || coalesce((object - '{created_at,updated_at,change_xid}'::text[])::text, '-')
				       || ' ' || coalesce(changed::text, '-')
				FROM events WHERE seq > $1 ORDER BY change_xid, seq`, last)
			if err != nil {
				t.Fatal(err)
			}
			out, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		triggers := groupDB(t)
		if _, err := dbtest.Raw(t, triggers).Exec(ctx, triggersWay); err != nil {
			t.Fatalf("install the trigger's way: %v", err)
		}
		want, got := run(triggers), run(groupDB(t))
		if len(want) < 5 {
			t.Fatalf("batch %v: the trigger's way wrote %d events:\n%s", batch, len(want), strings.Join(want, "\n"))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("batch %v:\n got:\n%s\n want:\n%s", batch, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
