package listing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/listing"
)

// TestHistoryDecision: which cursors the database's history can serve
// (partner_history_check in db/functions, as the page queries run it):
// one read on this timeline up to now, or one that does not say where it
// was read (made before cursors carried it), yes; one read on a timeline
// this server has not reached, one whose transaction is not yet assigned
// here, or one read past this timeline's WAL position (the history went
// back), no: cursor_expired, 410. (Earlier timelines, after a failover:
// TestHistoryForkDecision.)
func TestHistoryDecision(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	now, err := db.Q.HistoryNow(ctx, d.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if now.Timeline != 1 || now.Position <= 0 || now.NextXid <= 0 {
		t.Fatalf("HistoryNow = %+v; want timeline 1 and positive positions", now)
	}
	past := now.NextXid - 1
	for _, c := range []struct {
		name     string
		xid      int64
		timeline *int32
		wal      *int64
		ok       bool
	}{
		{"this timeline, now", past, &now.Timeline, &now.Position, true},
		{"this timeline, earlier", 1, &now.Timeline, ptr(now.Position - 1000), true},
		{"no timeline (an old cursor)", past, nil, nil, true},
		{"another timeline", past, ptr(now.Timeline + 1), &now.Position, false},
		{"a timeline this server never had", past, ptr(now.Timeline + 1000), ptr(int64(0)), false},
		{"past the WAL position", past, &now.Timeline, ptr(now.Position + 1<<30), false},
		{"transaction not yet assigned", now.NextXid + 1000, &now.Timeline, &now.Position, false},
		{"transaction not yet assigned, no timeline", now.NextXid + 1000, nil, nil, false},
	} {
		_, err := db.Q.HistoryCheck(ctx, d.Conn(), dbsqlc.HistoryCheckParams{Xid: c.xid, Timeline: c.timeline, Position: c.wal})
		expired := listing.HistoryExpired(err, "cursor")
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v; want served", c.name, err)
		case !c.ok && expired == nil:
			t.Errorf("%s: err %v; want cursor_expired", c.name, err)
		case !c.ok:
			var ae *apierror.Error
			if !errors.As(expired, &ae) || ae.Code != apierror.CodeCursorExpired || apierror.HTTPStatus(ae.Code) != 410 {
				t.Errorf("%s: %#v; want cursor_expired, 410", c.name, expired)
			}
		}
	}
	// The page queries judge the cursor before they read anything: a page
	// that would be empty (a workspace without records) is refused too.
	other := ptr(now.Timeline + 1)
	_, err = db.Q.ContactListChanges(ctx, d.Planned(), dbsqlc.ContactListChangesParams{
		WorkspaceID: uuid.New(), AfterXID: &past, AfterTimeline: other, AfterPosition: &now.Position, AfterID: &uuid.Nil, MaxRows: 51,
	})
	if listing.HistoryExpired(err, "cursor") == nil {
		t.Errorf("empty contacts page from another timeline: err %v; want cursor_expired", err)
	}
	_, err = db.Q.LeadListChanges(ctx, d.Planned(), dbsqlc.LeadListChangesParams{
		WorkspaceID: uuid.New(), AfterXID: &past, AfterTimeline: other, AfterPosition: &now.Position, AfterID: &uuid.Nil, MaxRows: 51,
	})
	if listing.HistoryExpired(err, "cursor") == nil {
		t.Errorf("empty leads page from another timeline: err %v; want cursor_expired", err)
	}
	_, err = db.Q.EventList(ctx, d.Planned(), dbsqlc.EventListParams{
		WorkspaceID: uuid.New(), AfterXID: past, CheckXid: &past, CheckTimeline: other, CheckPosition: &now.Position,
		Types: []string{"contact.created"}, MaxRows: 51,
	})
	if listing.HistoryExpired(err, "cursor") == nil {
		t.Errorf("empty events page from another timeline: err %v; want cursor_expired", err)
	}
	rows, err := db.Q.ContactListChanges(ctx, d.Planned(), dbsqlc.ContactListChangesParams{
		WorkspaceID: uuid.New(), AfterXID: &past, AfterTimeline: &now.Timeline, AfterPosition: &now.Position, AfterID: &uuid.Nil, MaxRows: 51,
	})
	if err != nil || len(rows) != 0 {
		t.Errorf("empty contacts page from this timeline: %d rows, %v; want none, no error", len(rows), err)
	}
	if listing.HistoryExpired(errors.New("other"), "cursor") != nil || listing.HistoryExpired(nil, "cursor") != nil {
		t.Error("HistoryExpired answered for an error that is not the history check's")
	}
}

func ptr[T any](v T) *T { return &v }

// TestHistoryForkDecision: which cursors read on an older timeline the
// history of a primary on timeline 3 can serve (partner_history_kept,
// migration 00110), from where each timeline of that history began
// (history_forks): one read at or before the switch point of the next
// timeline, yes; one read after it, or one whose chain of timelines has a
// gap, an unknown switch point, or a timeline not known to be an
// ancestor, no.
func TestHistoryForkDecision(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	// One transaction: a connection the pool opens meanwhile records its
	// timeline (db.OpenConfig), and must not see the rows below.
	err := d.WithTx(ctx, func(super db.DBTX) error {
		historyForkDecision(t, ctx, super)
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatal(err)
	}
}

func historyForkDecision(t *testing.T, ctx context.Context, super db.DBTX) {
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := super.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// A primary that was never a standby does not know where its timeline
	// began, and says so once.
	var noted bool
	exec("DELETE FROM history_forks")
	if err := super.QueryRow(ctx, "SELECT partner_history_note()").Scan(&noted); err != nil || !noted {
		t.Fatalf("partner_history_note on a fresh primary: %v, %v; want a record", noted, err)
	}
	var began *string
	if err := super.QueryRow(ctx, "SELECT began_at::text FROM history_forks WHERE timeline = 1").Scan(&began); err != nil || began != nil {
		t.Fatalf("timeline 1 began at %v, %v; want NULL (not known)", began, err)
	}
	if err := super.QueryRow(ctx, "SELECT partner_history_note()").Scan(&noted); err != nil || noted {
		t.Fatalf("partner_history_note again: %v, %v; want nothing written", noted, err)
	}

	const s2, s3 = "0/5002000", "0/6000000" // a page's start, a segment's start
	lsn := func(s string, plus int64) int64 {
		var n int64
		if err := super.QueryRow(ctx, "SELECT ($1::pg_lsn - '0/0'::pg_lsn)::bigint + $2", s, plus).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		name     string
		forks    map[int]*string // timeline → began_at
		timeline int
		wal      int64
		began    *string // where the current timeline began, when known live
		ok       bool
	}{
		{"timeline 2, before timeline 3 began", map[int]*string{2: ptr(s2), 3: ptr(s3)}, 2, lsn(s3, -1000), nil, true},
		{"timeline 2, at the switch point", map[int]*string{2: ptr(s2), 3: ptr(s3)}, 2, lsn(s3, 0), nil, true},
		{"timeline 2, after the segment header", map[int]*string{2: ptr(s2), 3: ptr(s3)}, 2, lsn(s3, 40), nil, true},
		{"timeline 2, after timeline 3 began", map[int]*string{2: ptr(s2), 3: ptr(s3)}, 2, lsn(s3, 48), nil, false},
		{"timeline 1, before timeline 2 began", map[int]*string{2: ptr(s2), 3: ptr(s3)}, 1, lsn(s2, -8), nil, true},
		{"timeline 1, after the page header", map[int]*string{2: ptr(s2), 3: ptr(s3)}, 1, lsn(s2, 24), nil, true},
		{"timeline 1, after timeline 2 began", map[int]*string{2: ptr(s2), 3: ptr(s3)}, 1, lsn(s2, 32), nil, false},
		{"timeline 1, after timeline 2 began, before 3", map[int]*string{2: ptr(s2), 3: ptr(s3)}, 1, lsn(s3, -1000), nil, false},
		{"no record of the current timeline, known live", map[int]*string{2: ptr(s2)}, 2, lsn(s3, -8), ptr(s3), true},
		{"no record of the current timeline, live after it", map[int]*string{2: ptr(s2)}, 2, lsn(s3, 48), ptr(s3), false},
		{"no record of the current timeline, not known", map[int]*string{2: ptr(s2)}, 2, lsn(s3, -1000), nil, false},
		{"the current timeline recorded as not known", map[int]*string{2: ptr(s2), 3: nil}, 2, lsn(s3, -1000), ptr(s3), false},
		{"a gap in the chain", map[int]*string{3: ptr(s3)}, 1, lsn(s2, -1000), nil, false},
		{"timeline 2 not known to be an ancestor", map[int]*string{3: ptr(s3)}, 2, lsn(s3, -1000), nil, false},
		{"a timeline after the current one", map[int]*string{2: ptr(s2), 3: ptr(s3)}, 4, lsn(s2, 0), nil, false},
	} {
		exec("DELETE FROM history_forks")
		for tl, at := range c.forks {
			exec("INSERT INTO history_forks (timeline, began_at) VALUES ($1, $2::text::pg_lsn)", tl, at)
		}
		var why *string
		if err := super.QueryRow(ctx, "SELECT partner_history_kept($1, $2, 3, $3::text::pg_lsn)", c.timeline, c.wal, c.began).Scan(&why); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (why == nil) != c.ok {
			t.Errorf("%s: refused because %v; want served %v", c.name, deref(why), c.ok)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "(served)"
	}
	return *s
}
