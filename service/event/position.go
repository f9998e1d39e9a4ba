package event

import (
	"github.com/google/uuid"

	"github.com/svat/partnerapi/internal/edge/apierror"
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
