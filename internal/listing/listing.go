// Package listing holds what the list endpoints share: the limit, sort,
// createdSince/updatedSince and cursor parameters, and building the next
// cursor of a keyset page. Invalid list parameters are 400s, never a silent
// clamp.
package listing

import (
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/internal/apierror"
)

// Limits of the limit parameter.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// Sort is a validated sort parameter.
type Sort struct {
	// Name is the parameter value, e.g. "-createdAt".
	Name string
	// ByUpdated sorts by updatedAt instead of createdAt.
	ByUpdated bool
	// Desc sorts newest first.
	Desc bool
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
		p.Sort = Sort{Name: "updatedAt", ByUpdated: true}
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
	if r.Cursor != "" {
		pos, err := codec.Decode(p.binding, r.Cursor)
		if err != nil {
			return p, Invalid("cursor", "is not a cursor of this list; pass pagination.nextCursor of the previous page with the same filters and sort")
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

// AfterTime and AfterID are the keyset arguments of the list queries.
func (p Params) AfterTime() *time.Time {
	if p.After == nil {
		return nil
	}
	return &p.After.Time
}

// AfterID is the id half of the keyset position.
func (p Params) AfterID() *uuid.UUID {
	if p.After == nil {
		return nil
	}
	return &p.After.ID
}

// Next trims a page fetched with Limit+1 rows and returns the cursor of
// the next page, or nil on the last page. key returns a row's sort value
// (createdAt or updatedAt, per the sort) and id.
func Next[T any](codec Cursors, p Params, rows []T, key func(T, bool) (time.Time, uuid.UUID)) ([]T, *string) {
	if len(rows) <= int(p.Limit) {
		return rows, nil
	}
	rows = rows[:p.Limit]
	t, id := key(rows[len(rows)-1], p.Sort.ByUpdated)
	c := codec.Encode(p.binding, Position{Time: t, ID: id})
	return rows, &c
}

// Query runs the one of a resource's four list queries that matches the
// sort. Each query has a fixed ORDER BY so that it walks its index.
func Query[T any](p Params, createdDesc, createdAsc, updatedDesc, updatedAsc func() ([]T, error)) ([]T, error) {
	switch {
	case !p.Sort.ByUpdated && p.Sort.Desc:
		return createdDesc()
	case !p.Sort.ByUpdated:
		return createdAsc()
	case p.Sort.Desc:
		return updatedDesc()
	default:
		return updatedAsc()
	}
}
