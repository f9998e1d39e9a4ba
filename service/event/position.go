package event

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/listing"
)

// Position reads an events cursor of the workspace (an event's cursor or
// a feed page's) as the place in the feed after which it means "every
// later event", for a webhook replay. As in ListEvents, a cursor that is
// not one of the workspace's events cursors is a 400 naming field, and
// one older than the retention is cursor_expired (410), since events
// after it may be gone.
func (s *Service) Position(workspace uuid.UUID, field, cursor string) (xid, seq int64, err error) {
	pos, err := s.Cursors.Decode(listing.Binding{Workspace: workspace, Resource: resource, Key: "xid"}, cursor)
	if err != nil {
		return 0, 0, listing.Invalid(field, "is not an events cursor; pass an event's cursor, or pagination.nextCursor or syncCursor of a page of GET /api/v1/events")
	}
	p := unpack(pos)
	if p.stamp.Before(s.now().Add(-s.retention())) {
		return 0, 0, apierror.New(apierror.CodeCursorExpired,
			field+" is older than the events kept ("+s.retention().String()+"); replay from a later cursor")
	}
	return p.xid, p.seq, nil
}

// InHistory checks, in tx, that an events cursor that [Service.Position]
// accepted does not point past the database's history: after a failover
// that discarded transactions the cursor had seen, the new primary hands
// their ids out again, and a replay from it would skip the events written
// since. Such a cursor is cursor_expired (410) naming field. Run it in the
// transaction that uses the position (a webhook replay), so that both
// meet the same server.
func (s *Service) InHistory(ctx context.Context, tx db.DBTX, workspace uuid.UUID, field, cursor string) error {
	pos, err := s.Cursors.Decode(listing.Binding{Workspace: workspace, Resource: resource, Key: "xid"}, cursor)
	if err != nil {
		return listing.Invalid(field, "is not an events cursor; pass an event's cursor, or pagination.nextCursor or syncCursor of a page of GET /api/v1/events")
	}
	xid, timeline, wal := unpack(pos).check()
	if _, err := db.Q.HistoryCheck(ctx, tx, dbsqlc.HistoryCheckParams{Xid: *xid, Timeline: timeline, Position: wal}); err != nil {
		if e := listing.HistoryExpiredReplay(err, field); e != nil {
			return e
		}
		return fmt.Errorf("check events cursor: %w", err)
	}
	return nil
}
