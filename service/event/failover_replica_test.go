package event_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/service/servertest"
)

// TestCursorsReadOnAStandbyFromADiscardedHistoryAreExpired is issue 23
// item 2 with the follower's pages served by a standby (item 5). One
// standby is cut off; the primary commits more contacts, which a second
// standby, the read pool's, replays, and a follower's sync walk and events
// feed read past them there. The first standby is promoted without them,
// and hands their transaction ids out again. The follower's cursors carry
// where the read standby was in its history (migration 00114), so the new
// primary refuses them (410 cursor_expired). Before, a standby's cursors
// carried no timeline, and once the new primary's transaction ids passed
// them they were served, skipping the contacts written in between.
func TestCursorsReadOnAStandbyFromADiscardedHistoryAreExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := dbtest.NewCluster(t)
	reads := dbtest.NewStandby(t, primary)
	dOld, err := db.OpenConfig(ctx, db.Config{URL: primary.URL, ReadURL: reads.URL, ReadWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dOld.Close)
	old := servertest.New(t, servertest.Options{DB: dOld})
	tn := old.NewFastTenant("Standby Failover")
	for i := range 3 {
		create(t, old, tn.Token, "/api/v1/contacts", fmt.Sprintf(`{"email":"kept%d@x.co"}`, i))
	}
	next := dbtest.NewStandby(t, primary)
	next.CatchUp(t, primary)
	next.Detach(t)

	var lost []string
	for i := range 20 {
		lost = append(lost, create(t, old, tn.Token, "/api/v1/contacts", fmt.Sprintf(`{"email":"lost%d@x.co"}`, i)))
	}
	onStandby0, onPrimary0 := dOld.ReadStat()
	_, contactsCursor := syncWalkUntil(t, old, tn.Token, "/api/v1/contacts", func(ids []string) bool { return containsAll(ids, lost) })
	var evs []event
	var eventsCursor string
	if !dbtest.Until(10*time.Second, func() bool {
		evs, eventsCursor, err = feed(old, tn.Token, "", "contact.created", 5)
		return err != nil || containsAll(eventIDs(evs), lost)
	}) || err != nil {
		t.Fatalf("events read on the standby: %v, %v", eventIDs(evs), err)
	}
	if s, p := dOld.ReadStat(); s == onStandby0 || p != onPrimary0 {
		t.Fatalf("pages read on the standby: %d, on the primary: %d; want all on the standby", s-onStandby0, p-onPrimary0)
	}
	var oldNext int64
	if err := primary.Super(t).QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&oldNext); err != nil {
		t.Fatal(err)
	}

	next.Promote(t)
	dNew, err := db.Open(ctx, next.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dNew.Close)
	h := servertest.New(t, servertest.Options{DB: dNew})
	var skipped []string
	for i := range 2 {
		skipped = append(skipped, create(t, h, tn.Token, "/api/v1/contacts", fmt.Sprintf(`{"email":"new%d@x.co"}`, i)))
	}
	// Past the cursors' transaction ids, so that only where they were
	// read tells them apart.
	super := next.Super(t)
	for {
		var n int64
		if err := super.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint + 1").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > oldNext {
			break
		}
	}
	create(t, h, tn.Token, "/api/v1/contacts", `{"email":"after@x.co"}`)

	for name, path := range map[string]string{
		"contacts sync": "/api/v1/contacts?sort=updatedAt&cursor=" + url.QueryEscape(contactsCursor),
		"events":        "/api/v1/events?cursor=" + url.QueryEscape(eventsCursor),
	} {
		s, _, b := h.Do(http.MethodGet, path, tn.Token, "", "")
		if p := servertest.Decode(t, b); s != http.StatusGone || p["code"] != apierror.CodeCursorExpired {
			t.Errorf("%s, a cursor read on the standby, on the new primary: %d %s; want 410 cursor_expired (it would skip %v)",
				name, s, b, skipped)
		}
	}
}
