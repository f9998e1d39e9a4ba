package event_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	eventv1 "github.com/svat/partnerapi/gen/partner/event/v1"
	"github.com/svat/partnerapi/gen/partner/event/v1/eventv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	eventsvc "github.com/svat/partnerapi/service/event"
	"github.com/svat/partnerapi/service/servertest"
)

// TestCursorsFromADiscardedHistoryAreExpired is issue 23 item 2 with a
// real failover. A standby is cut off; the old primary commits more
// contacts, leads and events, and a follower syncs past them. The standby
// is promoted (timeline 2) without them, and hands their transaction ids
// out again to the records written there. Served on the new primary, the
// follower's cursors would skip those records for good; they are refused
// with 410 cursor_expired (the sync walks of contacts and leads and the
// events feed over REST, the feed over Connect, and the check a webhook
// replay makes, Service.InHistory), and a walk started again on the new
// primary misses nothing. A cursor read before the fork, in the history
// the new primary kept, is still served, and misses nothing either.
func TestCursorsFromADiscardedHistoryAreExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := dbtest.NewCluster(t)
	dOld, err := db.Open(ctx, primary.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dOld.Close)
	old := servertest.New(t, servertest.Options{DB: dOld})
	tn := old.NewFastTenant("Failover")
	for i := range 3 {
		create(t, old, tn.Token, "/api/v1/contacts", fmt.Sprintf(`{"email":"kept%d@x.co"}`, i))
		create(t, old, tn.Token, "/api/v1/leads", fmt.Sprintf(`{"contact":{"email":"keptlead%d@x.co"},"title":"Kept"}`, i))
	}
	// A cursor of the history the failover keeps (read before the
	// standby's copy, migration 00110): it is still served.
	keptRead, keptContacts := syncWalk(t, old, tn.Token, "/api/v1/contacts")
	whID, whSecret := old.FastClient(tn.WorkspaceID, tn.MemberID, "contacts:read", "webhooks:read", "webhooks:write")
	whToken := old.Token(whID, whSecret, "")
	endpoint := create(t, old, whToken, "/api/v1/webhook-endpoints", `{"url":"https://hooks.example.com/x","eventTypes":["contact.created"]}`)
	standby := dbtest.NewStandby(t, primary)
	standby.CatchUp(t, primary)
	standby.Detach(t)

	// Only the old primary has these (more transactions than the new
	// primary makes before the records below), and a follower reads past
	// them.
	var lost []string
	for i := range 20 {
		lost = append(lost, create(t, old, tn.Token, "/api/v1/contacts", fmt.Sprintf(`{"email":"lost%d@x.co"}`, i)))
	}
	lostLead := create(t, old, tn.Token, "/api/v1/leads", `{"contact":{"email":"lostlead@x.co"},"title":"Lost"}`)
	// Each walk waits out the watermark: a transaction open elsewhere in
	// the cluster (the server's own work) holds the newest changes back.
	_, contactsCursor := syncWalkUntil(t, old, tn.Token, "/api/v1/contacts", func(ids []string) bool { return containsAll(ids, lost) })
	_, leadsCursor := syncWalkUntil(t, old, tn.Token, "/api/v1/leads", func(ids []string) bool { return containsAll(ids, []string{lostLead}) })
	oldSuper := primary.Super(t)
	var stored int
	if err := oldSuper.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	var evs []event
	var eventsCursor string
	if !dbtest.Until(10*time.Second, func() bool {
		evs, eventsCursor, err = feed(old, tn.Token, "", "", 5)
		return err != nil || len(evs) == stored
	}) || err != nil {
		t.Fatalf("events on the old primary: %d of %d, %v", len(evs), stored, err)
	}
	lastEvent := evs[len(evs)-1].Cursor
	var oldNext int64
	if err := oldSuper.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&oldNext); err != nil {
		t.Fatal(err)
	}

	standby.Promote(t)
	dNew, err := db.Open(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dNew.Close)
	if now, err := db.Q.HistoryNow(ctx, dNew.Conn()); err != nil || now.Timeline != 2 {
		t.Fatalf("the promoted standby: %+v, %v; want timeline 2", now, err)
	}
	h := servertest.New(t, servertest.Options{DB: dNew})
	// Written where the discarded transactions were: their ids are at or
	// below the follower's cursors.
	var skipped []string
	for i := range 2 {
		skipped = append(skipped, create(t, h, tn.Token, "/api/v1/contacts", fmt.Sprintf(`{"email":"new%d@x.co"}`, i)))
	}
	// Then past them, so that only the timeline tells the cursors apart.
	super := standby.Super(t)
	for {
		var next int64
		if err := super.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint + 1").Scan(&next); err != nil {
			t.Fatal(err)
		}
		if next > oldNext {
			break
		}
	}
	after := create(t, h, tn.Token, "/api/v1/contacts", `{"email":"after@x.co"}`)

	for name, path := range map[string]string{
		"contacts sync":               "/api/v1/contacts?sort=updatedAt&cursor=" + url.QueryEscape(contactsCursor),
		"leads sync":                  "/api/v1/leads?sort=updatedAt&cursor=" + url.QueryEscape(leadsCursor),
		"events sync cursor":          "/api/v1/events?cursor=" + url.QueryEscape(eventsCursor),
		"an event's cursor":           "/api/v1/events?cursor=" + url.QueryEscape(lastEvent),
		"an event's cursor, one type": "/api/v1/events?types=lead.created&cursor=" + url.QueryEscape(lastEvent),
	} {
		// The leads and lead.created pages would be empty: refused all
		// the same, before anything is read.
		s, _, b := h.Do(http.MethodGet, path, tn.Token, "", "")
		p := servertest.Decode(t, b)
		if s != http.StatusGone || p["code"] != apierror.CodeCursorExpired {
			t.Errorf("%s on the new primary: %d %s; want 410 cursor_expired", name, s, b)
		}
	}
	ec := eventv1connect.NewEventServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	_, err = ec.ListEvents(ctx, connect.NewRequest(&eventv1.ListEventsRequest{Cursor: eventsCursor}))
	servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, apierror.CodeCursorExpired)

	// The cursor read before the fork serves every contact written since
	// on the new primary, those whose transaction ids the lost ones had
	// too (its own are below them), and none of the lost ones.
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	var sinceKept []string
	for _, id := range ids(t, super, "SELECT id FROM contacts WHERE workspace_id = $1", ws) {
		if s := opaqueid.Format(opaqueid.Contact, id); !slices.Contains(keptRead, s) {
			sinceKept = append(sinceKept, s)
		}
	}
	gotKept, _ := syncWalkUntil(t, h, tn.Token, "/api/v1/contacts", func(ids []string) bool { return len(ids) >= len(sinceKept) }, keptContacts)
	slices.Sort(gotKept)
	slices.Sort(sinceKept)
	if !slices.Equal(gotKept, sinceKept) || !containsAll(gotKept, append(slices.Clone(skipped), after)) || containsAny(gotKept, lost) {
		t.Errorf("contacts from a cursor of the kept history: %v; want %v (with %v and %s, without %v)", gotKept, sinceKept, skipped, after, lost)
	}

	// A webhook replay's position is judged in its own transaction.
	var key []byte
	if err := super.QueryRow(ctx, "SELECT key FROM server_keys WHERE name = 'cursor'").Scan(&key); err != nil {
		t.Fatal(err)
	}
	events := &eventsvc.Service{DB: dNew, Cursors: listing.NewCursors(key)}
	if _, _, err := events.Position(ws, "fromCursor", lastEvent); err != nil {
		t.Fatalf("Position (no database): %v", err)
	}
	if e := asAPIError(events.InHistory(ctx, dNew.Conn(), ws, "fromCursor", lastEvent)); e == nil || e.Code != apierror.CodeCursorExpired {
		t.Errorf("InHistory of an old event's cursor on the new primary: %v; want cursor_expired", e)
	}

	replay := `{"fromCursor":"` + lastEvent + `"}`
	if s, _, b := h.Do(http.MethodPost, "/api/v1/webhook-endpoints/"+endpoint+"/replay", whToken, "application/json", replay); s != http.StatusGone ||
		servertest.Decode(t, b)["code"] != apierror.CodeCursorExpired {
		t.Errorf("replay from an old event's cursor on the new primary: %d %s; want 410 cursor_expired", s, b)
	}

	// Started again on the new primary, a walk misses nothing, and its
	// cursors serve what comes next.
	var want []string
	rows, err := super.Query(ctx, "SELECT id FROM contacts WHERE workspace_id = $1 ORDER BY id", ws)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		want = append(want, opaqueid.Format(opaqueid.Contact, id))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	got, cursor := syncWalkUntil(t, h, tn.Token, "/api/v1/contacts", func(ids []string) bool { return len(ids) >= len(want) })
	if !containsAll(got, append(skipped, after)) || containsAny(got, lost) || len(got) != len(want) || !containsAll(got, want) {
		t.Errorf("a walk on the new primary: %v; want %v (with %v and %s, without %v)", got, want, skipped, after, lost)
	}
	next := create(t, h, tn.Token, "/api/v1/contacts", `{"email":"next@x.co"}`)
	if got, _ := syncWalkUntil(t, h, tn.Token, "/api/v1/contacts", func(ids []string) bool { return len(ids) > 0 }, cursor); !slices.Equal(got, []string{next}) {
		t.Errorf("from the new primary's sync cursor: %v; want [%s]", got, next)
	}
	evs, newEvents, err := feed(h, tn.Token, "", "", 5)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events on the new primary: %v", err)
	}
	if containsAny(eventIDs(evs), lost) {
		t.Errorf("the new primary's feed holds events of records it never had")
	}
	if e := asAPIError(events.InHistory(ctx, dNew.Conn(), ws, "fromCursor", evs[len(evs)-1].Cursor)); e != nil {
		t.Errorf("InHistory of the new primary's event cursor: %v", e)
	}
	replay = `{"fromCursor":"` + evs[len(evs)-1].Cursor + `"}`
	if s, _, b := h.Do(http.MethodPost, "/api/v1/webhook-endpoints/"+endpoint+"/replay", whToken, "application/json", replay); s != http.StatusAccepted {
		t.Errorf("replay from the new primary's event cursor: %d %s; want 202", s, b)
	}
	next = create(t, h, tn.Token, "/api/v1/contacts", `{"email":"next2@x.co"}`)
	dbtest.Until(10*time.Second, func() bool {
		evs, _, err = feed(h, tn.Token, newEvents, "", 5)
		return err != nil || len(evs) > 0
	})
	if err != nil || len(evs) != 1 || evs[0].Data.Object["id"] != next {
		t.Errorf("from the new primary's events cursor: %v %v; want contact.created of %s", evs, err, next)
	}
}

// create POSTs a record and returns its id.
func create(t *testing.T, h *servertest.Harness, token, path, body string) string {
	t.Helper()
	s, _, b := h.Do(http.MethodPost, path, token, "application/json", body)
	if s != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", path, s, b)
	}
	return servertest.ID(t, b)
}

// syncWalkUntil walks sort=updatedAt from cursor (the start when none),
// again and again until done holds of what it read (for up to 10 s: the
// watermark holds changes back while a transaction is open elsewhere),
// and returns the ids and the sync cursor of the last page.
func syncWalkUntil(t *testing.T, h *servertest.Harness, token, path string, done func([]string) bool, cursor ...string) ([]string, string) {
	t.Helper()
	var ids []string
	var sync string
	dbtest.Until(10*time.Second, func() bool {
		ids, sync = syncWalk(t, h, token, path, cursor...)
		return done(ids)
	})
	return ids, sync
}

// syncWalk walks sort=updatedAt from cursor (the start when none) in
// pages of 2, and returns the ids and the sync cursor of the last page.
func syncWalk(t *testing.T, h *servertest.Harness, token, path string, cursor ...string) ([]string, string) {
	t.Helper()
	q := url.Values{"sort": {"updatedAt"}, "limit": {"2"}}
	if len(cursor) > 0 {
		q.Set("cursor", cursor[0])
	}
	var ids []string
	for range 100 {
		s, _, b := h.Do(http.MethodGet, path+"?"+q.Encode(), token, "", "")
		if s != http.StatusOK {
			t.Fatalf("GET %s?%s: %d %s", path, q.Encode(), s, b)
		}
		var p servertest.Page
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Contacts {
			ids = append(ids, c.ID)
		}
		for _, l := range p.Leads {
			ids = append(ids, l.ID)
		}
		if p.Pagination.NextCursor == nil {
			if p.Pagination.SyncCursor == nil {
				t.Fatalf("last page without syncCursor: %s", b)
			}
			return ids, *p.Pagination.SyncCursor
		}
		q.Set("cursor", *p.Pagination.NextCursor)
	}
	t.Fatal("walk does not end")
	return nil, ""
}

func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

func containsAny(got, some []string) bool {
	for _, s := range some {
		if slices.Contains(got, s) {
			return true
		}
	}
	return false
}

func eventIDs(evs []event) []string {
	var ids []string
	for _, e := range evs {
		if id, ok := e.Data.Object["id"].(string); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func asAPIError(err error) *apierror.Error {
	if err == nil {
		return nil
	}
	e, ok := err.(*apierror.Error)
	if !ok {
		return &apierror.Error{Code: "not an API error: " + err.Error()}
	}
	return e
}

// TestCursorsFromAKeptHistoryStillServe is the other half of issue 23 item
// 2 with a real failover: a planned switchover, which loses nothing. A
// follower syncs contacts, leads and events on the primary; the primary
// stops cleanly, its standby replays everything and is promoted (timeline
// 2) and records where its timeline began (migration 00110). Records
// written on the new primary then reach the follower from its old cursors:
// every one of them, nothing it had already read, nothing refused.
func TestCursorsFromAKeptHistoryStillServe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := dbtest.NewCluster(t)
	dOld, err := db.Open(ctx, primary.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dOld.Close)
	old := servertest.New(t, servertest.Options{DB: dOld})
	tn := old.NewFastTenant("Switchover")
	standby := dbtest.NewStandby(t, primary)
	var oldContacts, oldLeads []string
	for i := range 3 {
		oldContacts = append(oldContacts, create(t, old, tn.Token, "/api/v1/contacts", fmt.Sprintf(`{"email":"old%d@x.co"}`, i)))
		oldLeads = append(oldLeads, create(t, old, tn.Token, "/api/v1/leads", fmt.Sprintf(`{"contact":{"email":"oldlead%d@x.co"},"title":"Old"}`, i)))
	}
	readContacts, contactsCursor := syncWalkUntil(t, old, tn.Token, "/api/v1/contacts", func(ids []string) bool { return containsAll(ids, oldContacts) })
	readLeads, leadsCursor := syncWalkUntil(t, old, tn.Token, "/api/v1/leads", func(ids []string) bool { return containsAll(ids, oldLeads) })
	var stored int
	if err := primary.Super(t).QueryRow(ctx, "SELECT count(*) FROM events").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	var oldEvents []event
	var eventsCursor string
	if !dbtest.Until(10*time.Second, func() bool {
		oldEvents, eventsCursor, err = feed(old, tn.Token, "", "", 5)
		return err != nil || len(oldEvents) == stored
	}) || err != nil {
		t.Fatalf("events on the old primary: %d of %d, %v", len(oldEvents), stored, err)
	}
	lastEvent := oldEvents[len(oldEvents)-1].Cursor

	standby.Switchover(t, primary)
	dNew, err := db.Open(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dNew.Close)
	super := standby.Super(t)
	h := servertest.New(t, servertest.Options{DB: dNew})
	var newContacts, newLeads []string
	for i := range 2 {
		newContacts = append(newContacts, create(t, h, tn.Token, "/api/v1/contacts", fmt.Sprintf(`{"email":"new%d@x.co"}`, i)))
		newLeads = append(newLeads, create(t, h, tn.Token, "/api/v1/leads", fmt.Sprintf(`{"contact":{"email":"newlead%d@x.co"},"title":"New"}`, i)))
	}
	// The service's first connection to the new primary recorded it.
	var began, replayed string
	if err := super.QueryRow(ctx, "SELECT coalesce(began_at::text, 'NULL'), pg_last_wal_replay_lsn()::text FROM history_forks WHERE timeline = 2").
		Scan(&began, &replayed); err != nil || began != replayed {
		t.Fatalf("where timeline 2 began: %s (%v); want the end of the standby's replay, %s", began, err, replayed)
	}
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)

	// From the old sync cursors: exactly what the follower has not read.
	for _, c := range []struct {
		path, cursor, table string
		kind                string
		read, written       []string
	}{
		{"/api/v1/contacts", contactsCursor, "contacts", opaqueid.Contact, readContacts, newContacts},
		{"/api/v1/leads", leadsCursor, "leads", opaqueid.Lead, readLeads, newLeads},
	} {
		var want []string
		for _, id := range ids(t, super, "SELECT id FROM "+c.table+" WHERE workspace_id = $1", ws) {
			if s := opaqueid.Format(c.kind, id); !slices.Contains(c.read, s) {
				want = append(want, s)
			}
		}
		got, _ := syncWalkUntil(t, h, tn.Token, c.path, func(ids []string) bool { return len(ids) >= len(want) }, c.cursor)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) || !containsAll(got, c.written) {
			t.Errorf("%s from a sync cursor of the old primary: %v; want %v (with %v)", c.path, got, want, c.written)
		}
	}

	// From the old events cursor: every event written since, once.
	var total int
	if err := super.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&total); err != nil {
		t.Fatal(err)
	}
	var evs []event
	if !dbtest.Until(10*time.Second, func() bool {
		evs, _, err = feed(h, tn.Token, eventsCursor, "", 5)
		return err != nil || len(evs) >= total-len(oldEvents)
	}) || err != nil || len(evs) != total-len(oldEvents) {
		t.Fatalf("events from the old primary's cursor: %d, %v; want %d", len(evs), err, total-len(oldEvents))
	}
	seen := map[string]bool{}
	for _, e := range oldEvents {
		seen[e.ID] = true
	}
	for _, e := range evs {
		if seen[e.ID] {
			t.Errorf("event %s (%s) served again from the old primary's cursor", e.ID, e.Type)
		}
		seen[e.ID] = true
	}
	if !containsAll(eventIDs(evs), append(slices.Clone(newContacts), newLeads...)) {
		t.Errorf("events from the old primary's cursor: %v; want those of %v and %v", eventIDs(evs), newContacts, newLeads)
	}
	ec := eventv1connect.NewEventServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	if res, err := ec.ListEvents(ctx, connect.NewRequest(&eventv1.ListEventsRequest{Cursor: lastEvent})); err != nil || len(res.Msg.GetEvents()) == 0 {
		t.Errorf("ListEvents over Connect from an old event's cursor: %v; want the new events", err)
	}
	var key []byte
	if err := super.QueryRow(ctx, "SELECT key FROM server_keys WHERE name = 'cursor'").Scan(&key); err != nil {
		t.Fatal(err)
	}
	events := &eventsvc.Service{DB: dNew, Cursors: listing.NewCursors(key)}
	if e := asAPIError(events.InHistory(ctx, dNew.Conn(), ws, "fromCursor", lastEvent)); e != nil {
		t.Errorf("InHistory of an old event's cursor after a switchover: %v; want served", e)
	}

	// Restarted, the new primary no longer knows where its timeline
	// began (pg_last_wal_replay_lsn() is NULL): what was recorded serves.
	standby.Restart(t)
	dAgain, err := db.Open(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dAgain.Close)
	var replay *string
	if err := standby.Super(t).QueryRow(ctx, "SELECT pg_last_wal_replay_lsn()::text").Scan(&replay); err != nil || replay != nil {
		t.Fatalf("pg_last_wal_replay_lsn() after a restart: %v, %v; want NULL", replay, err)
	}
	again := servertest.New(t, servertest.Options{DB: dAgain})
	got, _ := syncWalkUntil(t, again, tn.Token, "/api/v1/leads", func(ids []string) bool { return len(ids) >= len(newLeads) }, leadsCursor)
	if !slices.Equal(got, newLeads) {
		t.Errorf("leads from a sync cursor of the old primary after a restart: %v; want %v", got, newLeads)
	}
}

// ids runs a query of one uuid column on pool.
func ids(t *testing.T, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) []uuid.UUID {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCursorsAfterTheNewPrimaryCrashed: when the new primary crashed
// before the service first reached it, pg_last_wal_replay_lsn() is the end
// of the crash recovery, not the switch point, and migration 00110 does not
// trust it: where timeline 2 began is not known, and a cursor from before
// the switchover is refused with 410 cursor_expired, though nothing was
// lost (safe, once). Unless the service's role may read the timeline
// history file (GRANT EXECUTE ON FUNCTION pg_read_file(text)): then the
// switch point is known exactly, and the cursor is served.
func TestCursorsAfterTheNewPrimaryCrashed(t *testing.T) {
	t.Parallel()
	for _, grant := range []bool{false, true} {
		t.Run(fmt.Sprintf("history file readable %v", grant), func(t *testing.T) {
			t.Parallel()
			cursorsAfterTheNewPrimaryCrashed(t, grant)
		})
	}
}

func cursorsAfterTheNewPrimaryCrashed(t *testing.T, grant bool) {
	ctx := context.Background()
	primary := dbtest.NewCluster(t)
	if grant {
		if _, err := primary.Super(t).Exec(ctx, "GRANT EXECUTE ON FUNCTION pg_read_file(text) TO "+dbtest.Role); err != nil {
			t.Fatal(err)
		}
	}
	dOld, err := db.Open(ctx, primary.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dOld.Close)
	old := servertest.New(t, servertest.Options{DB: dOld})
	tn := old.NewFastTenant("Crash")
	standby := dbtest.NewStandby(t, primary)
	c := create(t, old, tn.Token, "/api/v1/contacts", `{"email":"old@x.co"}`)
	_, cursor := syncWalkUntil(t, old, tn.Token, "/api/v1/contacts", func(ids []string) bool { return slices.Contains(ids, c) })

	standby.Switchover(t, primary)
	var switched string
	if err := standby.Super(t).QueryRow(ctx, "SELECT pg_last_wal_replay_lsn()::text").Scan(&switched); err != nil {
		t.Fatal(err)
	}
	standby.Crash(t)
	dNew, err := db.Open(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dNew.Close)
	h := servertest.New(t, servertest.Options{DB: dNew})
	created := create(t, h, tn.Token, "/api/v1/contacts", `{"email":"new@x.co"}`)
	var began *string
	var replayed string
	if err := standby.Super(t).QueryRow(ctx, "SELECT began_at::text, pg_last_wal_replay_lsn()::text FROM history_forks WHERE timeline = 2").
		Scan(&began, &replayed); err != nil || replayed == switched {
		t.Fatalf("after the crash: %v, replay at %s; want the replay past the switch point %s", err, replayed, switched)
	}
	if grant {
		if began == nil || *began != switched {
			t.Fatalf("timeline 2 recorded as beginning at %v; want %s, from its history file", deref(began), switched)
		}
		if got, _ := syncWalkUntil(t, h, tn.Token, "/api/v1/contacts", func(ids []string) bool { return len(ids) > 0 }, cursor); !slices.Equal(got, []string{created}) {
			t.Errorf("a cursor from before the switchover, after a crash: %v; want [%s]", got, created)
		}
		return
	}
	if began != nil {
		t.Fatalf("timeline 2 recorded as beginning at %s; want not known", *began)
	}
	s, _, b := h.Do(http.MethodGet, "/api/v1/contacts?sort=updatedAt&cursor="+url.QueryEscape(cursor), tn.Token, "", "")
	if s != http.StatusGone || servertest.Decode(t, b)["code"] != apierror.CodeCursorExpired {
		t.Errorf("a cursor from before the switchover, after a crash: %d %s; want 410 cursor_expired", s, b)
	}
}

// deref is *s, or "NULL".
func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
