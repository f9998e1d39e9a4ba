// Package listing holds what the list endpoints share: the limit, sort,
// createdSince/updatedSince and cursor parameters, and building the next
// cursor of a keyset page. Invalid list parameters are 400s, never a silent
// clamp.
//
// sort=updatedAt is the sync walk: it follows (change_xid, id), the order
// in which changes became visible, below a watermark the query reads from
// its own snapshot (see migration 00011), and its last page carries a sync
// cursor instead of nothing, for the client to come back with later. Its
// cursors carry the timeline they were read on, and a cursor the current
// history of the database cannot serve (a failover discarded what it saw)
// is cursor_expired, never a silent gap (see [HistoryExpired]).
package listing

import (
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svat/partnerapi/internal/contract/apierror"
)

// Limits of the limit parameter.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// Sorts are the values of the sort parameter, the default first; Parse
// accepts exactly these (the OpenAPI document lists them).
var Sorts = []string{"-createdAt", "createdAt", "-updatedAt", "updatedAt"}

// Sort is a validated sort parameter.
type Sort struct {
	// Name is the parameter value, e.g. "-createdAt".
	Name string
	// ByUpdated sorts by updatedAt instead of createdAt.
	ByUpdated bool
	// Desc sorts newest first.
	Desc bool
	// Sync is the sync walk, sort=updatedAt: by change_xid, not by time.
	Sync bool
}

// Params are the parsed common parameters.
type Params struct {
	// Limit is the page size; queries fetch one more row to see if a next
	// page exists.
	Limit        int32
	Sort         Sort
	CreatedSince *time.Time
	UpdatedSince *time.Time
	// After is the position of the previous page's last record.
	After   *Position
	binding Binding
	// origin is where this page was read (ReadAt), for its cursors.
	origin Origin
}

// Request is the raw common parameters plus the canonical rendering of the
// resource's own filters, which the cursor is bound to.
type Request struct {
	Limit        *int32
	Sort         string
	CreatedSince string
	UpdatedSince string
	Cursor       string
	Filters      string
}

// Invalid is a 400 for one list parameter.
func Invalid(field, message string) *apierror.Error {
	e := apierror.Malformed(field + ": " + message)
	e.Fields = []apierror.FieldViolation{{Field: field, Code: "invalid_value", Message: message}}
	return e
}

// TextFilter is the value of a filter on a free-text field, such as
// externalId: trimmed, as the field was when it was stored, so that
// " crm-1 " finds "crm-1"; only spaces is no value, a 400, not a list of
// nothing.
func TextFilter(field, s string, maxBytes int) (*string, error) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return nil, Invalid(field, "must not be blank")
	case len(t) > maxBytes:
		return nil, Invalid(field, "is too long")
	}
	return &t, nil
}

// Parse validates the common parameters of a list of resource in workspace.
func Parse(codec Cursors, workspace uuid.UUID, resource string, r Request) (Params, error) {
	p := Params{Limit: DefaultLimit}
	if r.Limit != nil {
		if *r.Limit < 1 || *r.Limit > MaxLimit {
			return p, Invalid("limit", "must be an integer from 1 to 100")
		}
		p.Limit = *r.Limit
	}
	switch r.Sort {
	case "", "-createdAt":
		p.Sort = Sort{Name: "-createdAt", Desc: true}
	case "createdAt":
		p.Sort = Sort{Name: "createdAt"}
	case "-updatedAt":
		p.Sort = Sort{Name: "-updatedAt", ByUpdated: true, Desc: true}
	case "updatedAt":
		p.Sort = Sort{Name: "updatedAt", ByUpdated: true, Sync: true}
	default:
		return p, Invalid("sort", "must be createdAt, -createdAt, updatedAt or -updatedAt")
	}
	var err error
	if p.CreatedSince, err = since("createdSince", r.CreatedSince); err != nil {
		return p, err
	}
	if p.UpdatedSince, err = since("updatedSince", r.UpdatedSince); err != nil {
		return p, err
	}
	var filters strings.Builder
	filters.WriteString(r.Filters)
	if p.CreatedSince != nil {
		filters.WriteString("&createdSince=" + p.CreatedSince.Format(time.RFC3339Nano))
	}
	if p.UpdatedSince != nil {
		filters.WriteString("&updatedSince=" + p.UpdatedSince.Format(time.RFC3339Nano))
	}
	p.binding = Binding{Workspace: workspace, Resource: resource, Sort: p.Sort.Name, Filters: filters.String()}
	if p.Sort.Sync {
		// Sync positions are transaction ids; the key kind keeps a time
		// position from before it was one from being read as an id.
		p.binding.Key = "xid"
	}
	if r.Cursor != "" {
		pos, err := codec.Decode(p.binding, r.Cursor)
		if err != nil {
			return p, Invalid("cursor", "is not a cursor of this list; pass pagination.nextCursor (or syncCursor) of an earlier page with the same filters and sort")
		}
		p.After = &pos
	}
	return p, nil
}

func since(field, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, Invalid(field, "must be an RFC 3339 time such as 2026-01-31T09:00:00Z")
	}
	t = t.UTC()
	return &t, nil
}

// AfterTime is the time half of the keyset position of a time sort.
func (p Params) AfterTime() *time.Time {
	if p.After == nil || p.Sort.Sync {
		return nil
	}
	t := time.UnixMicro(p.After.Key).UTC()
	return &t
}

// Newest reports whether the page is of the default order (-createdAt)
// without the createdSince and updatedSince filters, and its position:
// after the previous page's last record, or the end of time for the first
// page. The caller checks its own filters; such a page can use a query
// whose plan does not depend on the values (ContactListNewest).
func (p Params) Newest() (afterTime time.Time, afterID uuid.UUID, ok bool) {
	if p.Sort.Sync || p.Sort.ByUpdated || !p.Sort.Desc || p.CreatedSince != nil || p.UpdatedSince != nil {
		return time.Time{}, uuid.UUID{}, false
	}
	if p.After == nil {
		return endOfTime, uuid.Max, true
	}
	return time.UnixMicro(p.After.Key).UTC(), p.After.ID, true
}

// endOfTime is after every record's creation.
var endOfTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// AfterXID is the change_xid half of the keyset position of the sync walk.
func (p Params) AfterXID() *int64 {
	if p.After == nil || !p.Sort.Sync {
		return nil
	}
	return &p.After.Key
}

// AfterTimeline and AfterWAL are where the sync walk's cursor was read,
// for the page query to refuse a cursor the current history cannot serve;
// nil for a cursor that does not say (made before cursors carried it).
func (p Params) AfterTimeline() *int32 {
	if p.After == nil || !p.Sort.Sync || !p.After.Origin.Known() {
		return nil
	}
	return &p.After.Origin.Timeline
}

// AfterWAL: see AfterTimeline.
func (p Params) AfterWAL() *int64 {
	if p.After == nil || !p.Sort.Sync || !p.After.Origin.Known() {
		return nil
	}
	return &p.After.Origin.WAL
}

// ReadAt returns p for a sync page read at o, as the page query reports
// it: the cursors made from its records carry o. A cursor of an empty
// page is the one it was asked with, and keeps its own origin.
func (p Params) ReadAt(o Origin) Params {
	p.origin = o
	return p
}

// AfterID is the id half of the keyset position.
func (p Params) AfterID() *uuid.UUID {
	if p.After == nil {
		return nil
	}
	return &p.After.ID
}

// Keys are a record's sort keys.
type Keys struct {
	CreatedAt, UpdatedAt time.Time
	ChangeXID            int64
	ID                   uuid.UUID
}

func (p Params) position(k Keys) Position {
	switch {
	case p.Sort.Sync:
		return Position{Key: k.ChangeXID, ID: k.ID, Origin: p.origin}
	case p.Sort.ByUpdated:
		return Position{Key: k.UpdatedAt.UnixMicro(), ID: k.ID}
	}
	return Position{Key: k.CreatedAt.UnixMicro(), ID: k.ID}
}

// Next trims a page fetched with Limit+1 rows and returns the cursor of
// the next page, or nil on the last page. On the last page of the sync
// walk it returns instead the sync cursor: the position after which every
// change still to become visible will appear, so that the client can come
// back for exactly what changed since. keys returns a row's sort keys.
func Next[T any](codec Cursors, p Params, rows []T, keys func(T) Keys) (page []T, next, sync *string) {
	if len(rows) > int(p.Limit) {
		rows = rows[:p.Limit]
		c := codec.Encode(p.binding, p.position(keys(rows[len(rows)-1])))
		return rows, &c, nil
	}
	if !p.Sort.Sync {
		return rows, nil, nil
	}
	var pos Position
	switch {
	case len(rows) > 0:
		pos = p.position(keys(rows[len(rows)-1]))
	case p.After != nil:
		pos = *p.After
	}
	c := codec.Encode(p.binding, pos)
	return rows, nil, &c
}

// Query runs the one of a resource's time-sorted list queries that matches
// the sort. Each query has a fixed ORDER BY so that it walks its index. The
// sync walk (Sort.Sync) has its own query, with other arguments; the caller
// runs it instead.
func Query[T any](p Params, createdDesc, createdAsc, updatedDesc func() ([]T, error)) ([]T, error) {
	switch {
	case !p.Sort.ByUpdated && p.Sort.Desc:
		return createdDesc()
	case !p.Sort.ByUpdated:
		return createdAsc()
	case p.Sort.Desc:
		return updatedDesc()
	}
	return nil, errors.New("listing: the sync walk has its own query")
}

// historyCode is the SQLSTATE partner_history_check raises (migration
// 00108) for a cursor that may point past the database's history.
const historyCode = "PH410"

// HistoryExpired returns the answer to a page query that refused its
// cursor because it may point past the current history of the database:
// a failover discarded transactions the cursor had seen, and the new
// primary hands their ids out again, so that rows committed since would
// fall behind the cursor. It is cursor_expired (410), as a cursor older
// than the events kept: the client starts again from the beginning.
// Any other error gives nil. field names the cursor parameter.
func HistoryExpired(err error, field string) error {
	return historyExpired(err, field, "start again without a cursor, from the beginning")
}

// HistoryExpiredReplay is [HistoryExpired] for a webhook replay's
// fromCursor, which names a place to replay from rather than a walk.
func HistoryExpiredReplay(err error, field string) error {
	return historyExpired(err, field, "replay from a cursor of the events listed since")
}

func historyExpired(err error, field, advice string) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != historyCode {
		return nil
	}
	return apierror.New(apierror.CodeCursorExpired,
		field+" was issued before the database's history changed (a failover, or a restore), and changes after it may be gone; "+advice)
}
