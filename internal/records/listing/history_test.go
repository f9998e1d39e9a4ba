package listing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/edge/apierror"
	"github.com/svat/partnerapi/internal/records/listing"
)

// TestHistoryDecision: which cursors the database's history can serve
// (partner_history_check, migration 00108, as the page queries run it):
// one read on this timeline up to now, or one that does not say where it
// was read (made before cursors carried it), yes; one read on another
// timeline (before a failover), one whose transaction is not yet assigned
// here, or one read past this timeline's WAL position (the history went
// back), no: cursor_expired, 410.
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
