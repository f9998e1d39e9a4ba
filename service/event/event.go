// Package event serves the event feed, GET /api/v1/events: one event per
// committed create, update or delete of a contact or a lead, written by
// the triggers of migration 00100 in the transaction of the change, and
// read here in the order the changes became visible, with the sync walk's
// guarantee that a reader never misses one.
package event

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	eventv1 "github.com/svat/partnerapi/gen/partner/event/v1"
	"github.com/svat/partnerapi/gen/partner/event/v1/eventv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/edge/jsoncodec"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/eventtype"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/internal/work/retention"
	"github.com/svat/partnerapi/service/contact"
	"github.com/svat/partnerapi/service/lead"
)

// DefaultRetention is how long events are kept (PARTNER_EVENT_RETENTION).
const DefaultRetention = retention.EventAge

// Service implements EventService.
type Service struct {
	DB      *db.DB
	Cursors listing.Cursors
	// Retention is how long events are kept; a cursor older than it is
	// cursor_expired (410), since events after it may be gone.
	Retention time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

var _ eventv1connect.EventServiceHandler = (*Service)(nil)

// The cursor of an event, or of a page, is bound to the workspace only:
// with any types it means "every event after this one".
const resource = "events"

// ListEvents answers one page of the feed.
func (s *Service) ListEvents(ctx context.Context, req *connect.Request[eventv1.ListEventsRequest]) (*connect.Response[eventv1.ListEventsResponse], error) {
	p := auth.FromContext(ctx)
	m := req.Msg
	limit := int32(listing.DefaultLimit)
	if m.Limit != nil {
		if *m.Limit < 1 || *m.Limit > listing.MaxLimit {
			return nil, listing.Invalid("limit", "must be an integer from 1 to 100")
		}
		limit = *m.Limit
	}
	types, err := readable(ctx, p.Scopes, m.GetTypes())
	if err != nil {
		return nil, err
	}
	binding := listing.Binding{Workspace: p.WorkspaceID, Resource: resource, Key: "xid"}
	var after position
	if m.GetCursor() != "" {
		pos, err := s.Cursors.Decode(binding, m.GetCursor())
		if err != nil {
			return nil, listing.Invalid("cursor", "is not an events cursor; pass an event's cursor, or pagination.nextCursor or syncCursor of an earlier page")
		}
		after = unpack(pos)
		if after.stamp.Before(s.now().Add(-s.retention())) {
			return nil, apierror.New(apierror.CodeCursorExpired,
				"the cursor is older than the events kept ("+s.retention().String()+"); start again without a cursor, and reconcile with a full list")
		}
	}
	params := dbsqlc.EventListParams{
		WorkspaceID: p.WorkspaceID, AfterXID: after.xid, AfterSeq: after.seq, Types: types, MaxRows: limit + 1,
	}
	if m.GetCursor() != "" {
		params.CheckXid, params.CheckTimeline, params.CheckPosition = after.check()
	}
	// A standby that shows every write acknowledged before may serve it.
	rd, err := s.DB.Reader(ctx)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rd.Close()
	rows, err := db.Q.EventList(ctx, rd.Planned(), params)
	if err != nil {
		if e := listing.HistoryExpired(err, "cursor"); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("list events: %w", err)
	}
	out := &eventv1.ListEventsResponse{Events: make([]*eventv1.Event, 0, min(len(rows), int(limit))), Pagination: &eventv1.Pagination{}}
	more := len(rows) > int(limit)
	if more {
		rows = rows[:limit]
	}
	for _, r := range rows {
		e, err := s.render(ctx, binding, r)
		if err != nil {
			return nil, err
		}
		out.Events = append(out.Events, e)
	}
	last := after
	if len(rows) > 0 {
		last = at(rows[len(rows)-1])
	}
	if more {
		c := s.Cursors.Encode(binding, last.pack())
		out.Pagination.NextCursor = &c
	} else {
		// The sync cursor is as young as the page: every event after last
		// that was visible now was served, so it expires only a retention
		// after now, however old last is.
		last.stamp = s.now()
		c := s.Cursors.Encode(binding, last.pack())
		out.Pagination.SyncCursor = &c
	}
	return connect.NewResponse(out), nil
}

// readable returns the types to list: those asked for (comma-separated),
// each one readable under the token's scopes (else 403), or every type
// the scopes can read.
func readable(ctx context.Context, scopes scope.Set, param string) ([]string, error) {
	var out []string
	if strings.TrimSpace(param) == "" {
		for _, t := range eventtype.All {
			if scopes.Has(t.Scope) {
				out = append(out, t.Name)
			}
		}
		if len(out) == 0 {
			return nil, auth.InsufficientScope(ctx, "contacts:read or leads:read")
		}
		return out, nil
	}
	for _, name := range strings.Split(param, ",") {
		t, ok := eventtype.Lookup(strings.TrimSpace(name))
		if !ok {
			return nil, listing.Invalid("types", "must be a comma-separated list of "+strings.Join(eventtype.Names(), ", "))
		}
		if !scopes.Has(t.Scope) {
			return nil, auth.InsufficientScope(ctx, t.ScopeName)
		}
		if !slices.Contains(out, t.Name) {
			out = append(out, t.Name)
		}
	}
	return out, nil
}

// position is a place in the feed: the change's transaction, the event's
// order in it, when the cursor's events were written (for expiry), and
// where in the database's history it was read (zero when not known).
type position struct {
	xid, seq int64
	stamp    time.Time
	origin   listing.Origin
}

// at is the position of a stored event, read where its page was read.
func at(r dbsqlc.EventListRow) position {
	return position{xid: r.ChangeXID, seq: r.Seq, stamp: r.CreatedAt,
		origin: listing.Origin{Timeline: r.HistoryTimeline, WAL: r.HistoryPosition}}
}

// check is the arguments of partner_history_check for p (migration
// 00108): its transaction, and where it was read when known.
func (p position) check() (xid *int64, timeline *int32, wal *int64) {
	if !p.origin.Known() {
		return &p.xid, nil, nil
	}
	return &p.xid, &p.origin.Timeline, &p.origin.WAL
}

// pack spells p as a listing position: the seq and the stamp take the
// 16 bytes of its id.
func (p position) pack() listing.Position {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[:8], uint64(p.seq))
	binary.BigEndian.PutUint64(id[8:], uint64(p.stamp.UnixMicro()))
	return listing.Position{Key: p.xid, ID: id, Origin: p.origin}
}

func unpack(l listing.Position) position {
	return position{
		xid:    l.Key,
		seq:    int64(binary.BigEndian.Uint64(l.ID[:8])),
		stamp:  time.UnixMicro(int64(binary.BigEndian.Uint64(l.ID[8:]))),
		origin: l.Origin,
	}
}

// Body is the JSON of a stored event as the feed answers it, for a
// webhook delivery: the exact bytes that are signed and sent. The record
// is rendered once, by the answers' encoder, straight into the event's
// envelope, which is written around it; the feed's Event is the same
// value (TestBodyIsTheFeedsEvent).
func Body(ctx context.Context, q db.DBTX, cursors listing.Cursors, workspace uuid.UUID, r dbsqlc.EventListRow) ([]byte, error) {
	live, err := liveOf(ctx, q, workspace, r)
	if err != nil {
		return nil, err
	}
	object, err := objectJSON(r.Type, r.RecordID, r.Object, live)
	if err != nil {
		return nil, fmt.Errorf("render event %d: %w", r.Seq, err)
	}
	env := envelope{
		ID:        opaqueid.Format(opaqueid.Event, r.ID),
		Type:      r.Type,
		CreatedAt: timestampJSON(r.CreatedAt),
		Cursor:    cursorOf(cursors, listing.Binding{Workspace: workspace, Resource: resource, Key: "xid"}, r),
		Data:      envelopeData{Object: object},
	}
	if isUpdate(r) {
		env.Data.ChangedFields = changedFields(r.Changed)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// As the answers' encoder (protojson) writes strings: <, > and & as
	// they are.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(env); err != nil {
		return nil, fmt.Errorf("render event %d: %w", r.Seq, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// envelope is an Event as its JSON spells it (eventv1.Event's members,
// in its order), with data's object as the record's own JSON.
type envelope struct {
	ID        string       `json:"id"`
	Type      string       `json:"type"`
	CreatedAt string       `json:"createdAt"`
	Cursor    string       `json:"cursor"`
	Data      envelopeData `json:"data"`
}

// envelopeData is an event's data: changedFields on updates only (an
// empty list is still a list), then the object.
type envelopeData struct {
	ChangedFields []string        `json:"changedFields,omitzero"`
	Object        json.RawMessage `json:"object"`
}

// timestampJSON spells t as the answers spell a google.protobuf.Timestamp:
// RFC 3339 in UTC, with 0, 3, 6 or 9 digits of fraction.
func timestampJSON(t time.Time) string {
	x := t.UTC().Format("2006-01-02T15:04:05.000000000")
	x = strings.TrimSuffix(x, "000")
	x = strings.TrimSuffix(x, "000")
	x = strings.TrimSuffix(x, ".000")
	return x + "Z"
}

// isUpdate says whether an event carries the members it changed: an
// update of a record not erased since.
func isUpdate(r dbsqlc.EventListRow) bool {
	return strings.HasSuffix(r.Type, ".updated") && r.Object != nil
}

// cursorOf is the cursor of a stored event under binding b.
func cursorOf(cursors listing.Cursors, b listing.Binding, r dbsqlc.EventListRow) string {
	return cursors.Encode(b, at(r).pack())
}

// render makes the API event of a stored one: its object as GET answers
// the record (only its id once erased), and for an update the members it
// changed.
func (s *Service) render(ctx context.Context, b listing.Binding, r dbsqlc.EventListRow) (*eventv1.Event, error) {
	var live map[string]customfield.Definition
	if holdsValues(r) {
		var err error
		if live, err = liveOf(ctx, s.DB.Conn(), b.Workspace, r); err != nil {
			return nil, err
		}
	}
	object, err := objectJSON(r.Type, r.RecordID, r.Object, live)
	if err != nil {
		return nil, fmt.Errorf("render event %d: %w", r.Seq, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(object, &obj); err != nil {
		return nil, fmt.Errorf("render event %d: %w", r.Seq, err)
	}
	data := map[string]any{"object": obj}
	if isUpdate(r) {
		changed := changedFields(r.Changed)
		list := make([]any, len(changed))
		for i, c := range changed {
			list[i] = c
		}
		data["changedFields"] = list
	}
	st, err := structpb.NewStruct(data)
	if err != nil {
		return nil, fmt.Errorf("render event %d: %w", r.Seq, err)
	}
	return &eventv1.Event{
		Id:        opaqueid.Format(opaqueid.Event, r.ID),
		Type:      r.Type,
		CreatedAt: timestamppb.New(r.CreatedAt),
		Cursor:    cursorOf(s.Cursors, b, r),
		Data:      st,
	}, nil
}

// objectJSON renders the record of an event of type typ from its stored
// row (to_jsonb of the contacts or leads row) through the record's own
// ToProto and the answers' JSON encoder, so that it is the record exactly
// as GET answered it then; an erased record (no row) is its id alone.
//
// live are the record kind's live custom field definitions: a deleted
// field's values leave every answer at once, the feed's and the webhooks'
// too, as they leave GET's (nil: every value, for a row that holds none).
func objectJSON(typ string, id uuid.UUID, row []byte, live map[string]customfield.Definition) ([]byte, error) {
	kind, _, _ := strings.Cut(typ, ".")
	var msg proto.Message
	switch kind {
	case "contact":
		if row == nil {
			return idOnly(opaqueid.Format(opaqueid.Contact, id)), nil
		}
		var c struct {
			dbsqlc.Contact
			CustomFields json.RawMessage `json:"custom_fields"`
		}
		if err := json.Unmarshal(row, &c); err != nil {
			return nil, err
		}
		c.Contact.CustomFields = storedValues(c.CustomFields)
		msg = contact.ToProto(c.Contact, live)
	case "lead":
		if row == nil {
			return idOnly(opaqueid.Format(opaqueid.Lead, id)), nil
		}
		var l struct {
			dbsqlc.Lead
			CustomFields json.RawMessage `json:"custom_fields"`
		}
		if err := json.Unmarshal(row, &l); err != nil {
			return nil, err
		}
		l.Lead.CustomFields = storedValues(l.CustomFields)
		msg = lead.ToProto(l.Lead, live)
	default:
		return nil, fmt.Errorf("unknown record kind %q", kind)
	}
	return jsoncodec.AppendREST(nil, msg)
}

// liveOf is the live custom field definitions of the event's record kind
// (customfield.Cached: a read a second at most per workspace and kind),
// or nil when the stored row holds no custom value.
func liveOf(ctx context.Context, q db.DBTX, workspace uuid.UUID, r dbsqlc.EventListRow) (map[string]customfield.Definition, error) {
	if !holdsValues(r) {
		return nil, nil
	}
	kind, _, _ := strings.Cut(r.Type, ".")
	set, err := customfield.Cached(ctx, q, workspace, customfield.Object(kind))
	if err != nil {
		return nil, fmt.Errorf("read custom fields of event %d: %w", r.Seq, err)
	}
	return set.ByKey, nil
}

// holdsValues reports whether an event's stored row holds custom values
// (to_jsonb writes `"custom_fields": {…}`, or null when none).
func holdsValues(r dbsqlc.EventListRow) bool {
	return bytes.Contains(r.Object, []byte(`"custom_fields": {`)) || bytes.Contains(r.Object, []byte(`"custom_fields":{`))
}

// storedValues is a row's custom_fields as its column holds them: JSON
// null is none.
func storedValues(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// idOnly is the object of an erased record: {"id": id} (an opaque id,
// which needs no escaping).
func idOnly(id string) []byte {
	return append(append([]byte(`{"id":"`), id...), `"}`...)
}

// changedFields spells changed columns as the members of the record:
// lowerCamelCase, and value_amount or value_currency as value.
func changedFields(columns []string) []string {
	out := make([]string, 0, len(columns))
	seen := map[string]bool{}
	for _, c := range columns {
		if key, ok := strings.CutPrefix(c, "custom_fields."); ok {
			// A custom field's key is named as the partner defined it.
			if name := "customFields." + key; !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
			continue
		}
		if strings.HasPrefix(c, "value_") {
			c = "value"
		}
		parts := strings.Split(c, "_")
		for i := 1; i < len(parts); i++ {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
		name := strings.Join(parts, "")
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) retention() time.Duration {
	if s.Retention > 0 {
		return s.Retention
	}
	return DefaultRetention
}
