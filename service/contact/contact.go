// Package contact implements partner.contact.v1.ContactService over the
// contacts of the token's workspace.
package contact

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/etag"
	"github.com/svat/partnerapi/internal/records/idempotency"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/person"
	"github.com/svat/partnerapi/internal/records/rounds"
	"github.com/svat/partnerapi/internal/records/validate"
	"github.com/svat/partnerapi/internal/security/auth"
)

// Path is the REST path, which also scopes idempotency keys.
const Path = "/api/v1/contacts"

// Service is the contact service.
type Service struct {
	DB      *db.DB
	Cursors listing.Cursors
}

var _ contactv1connect.ContactServiceHandler = (*Service)(nil)

// Fields are the validated, normalised fields of a new contact: a
// person's (shared with a lead's inline contact) and the partner's key.
type Fields struct {
	person.Fields
	ExternalID *string
	// CustomFields are the values as stored: NULL (nil) for none.
	CustomFields []byte
}

// IsConflict reports whether err is a contact's email or external id
// being taken.
func IsConflict(err error) bool {
	var c *db.ConflictError
	return errors.As(err, &c) && (c.Constraint == "contacts_email" || c.Constraint == "contacts_external_id")
}

// Duplicate is the 409 for a contact whose email or external id is taken,
// naming the holder other than self (the contact being updated, if any).
// It is [rounds.ErrConflictGone] when no contact holds either any more.
func Duplicate(ctx context.Context, d *db.DB, ws uuid.UUID, f Fields, self *uuid.UUID) error {
	existing, err := db.Q.ContactConflict(ctx, d.Conn(), dbsqlc.ContactConflictParams{
		WorkspaceID: ws, Email: f.Email, ExternalID: f.ExternalID, ExcludeID: self,
	})
	if errors.Is(err, db.ErrNotFound) {
		return rounds.ErrConflictGone
	}
	if err != nil {
		return fmt.Errorf("find conflicting contact: %w", err)
	}
	return duplicate(existing.ID, existing.ByEmail)
}

// duplicate says which member collides (the email when both do, as
// ContactConflict orders them), so a caller knows what to change.
func duplicate(existing uuid.UUID, byEmail bool) *apierror.Error {
	field := "externalId"
	if byEmail {
		field = "email"
	}
	msg := "a contact with this " + field + " already exists"
	return &apierror.Error{
		Code: apierror.CodeDuplicate, Message: msg,
		ExistingID: opaqueid.Format(opaqueid.Contact, existing),
		Fields:     []apierror.FieldViolation{{Field: field, Code: "duplicate", Message: msg}},
	}
}

// check validates and normalises a new contact, its custom values
// against defs: a malformed value (400) before any rule broken (422).
func check(in *contactv1.Contact, defs customfield.Set) (Fields, error) {
	var v validate.Errors
	f := checkFields(&v, in)
	cf := defs.Checker()
	f.CustomFields = cf.Create(&v, "", in.GetCustomFields()).Encode()
	if err := cf.Err(); err != nil {
		return f, err
	}
	return f, v.Err()
}

// checkFields validates and normalises a contact's own fields, as a
// create does (an update checks the contact it would make).
func checkFields(v *validate.Errors, in *contactv1.Contact) Fields {
	f := Fields{Fields: person.Check(v, "", in.Email, in.Phone, in.FirstName, in.LastName, in.CompanyName, in.JobTitle)}
	f.ExternalID = v.Text("externalId", in.ExternalId, 255)
	return f
}

// defs are the workspace's live contact fields (cached: see
// customfield.Cached).
func (s *Service) defs(ctx context.Context, ws uuid.UUID) (customfield.Set, error) {
	set, err := customfield.Cached(ctx, s.DB.Conn(), ws, customfield.Contact)
	if err != nil {
		return set, fmt.Errorf("read contact fields: %w", err)
	}
	return set, nil
}

// answerDefs are the live fields an answer of rows shows values of: none
// to read when no row holds a value.
func (s *Service) answerDefs(ctx context.Context, ws uuid.UUID, rows ...dbsqlc.Contact) (map[string]customfield.Definition, error) {
	for _, r := range rows {
		if r.CustomFields != nil {
			set, err := s.defs(ctx, ws)
			return set.ByKey, err
		}
	}
	return nil, nil
}

// URL is the REST address of a contact, for the Location of a create.
func URL(id uuid.UUID) string { return Path + "/" + opaqueid.Format(opaqueid.Contact, id) }

// ETag is the entity tag of a contact's current version.
func ETag(c dbsqlc.Contact) string { return etag.Of(c.ID, c.ChangeXID, c.UpdatedAt) }

// CreateContact creates a contact.
func (s *Service) CreateContact(ctx context.Context, req *connect.Request[contactv1.CreateContactRequest]) (*connect.Response[contactv1.CreateContactResponse], error) {
	p := auth.FromContext(ctx)
	in := req.Msg.GetContact()
	if in == nil {
		in = &contactv1.Contact{}
	}
	defs, err := s.defs(ctx, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	f, err := check(in, defs)
	if err != nil {
		return nil, err
	}
	key, err := idempotency.NewKey(p.WorkspaceID, p.ClientID, Path, req.Header(), req.Msg)
	if err != nil {
		return nil, err
	}
	arg := dbsqlc.ContactCreateParams{
		WorkspaceID: p.WorkspaceID, ClientID: p.ClientID, Path: Path, ID: opaqueid.New(),
		Email: f.Email, Phone: f.Phone, FirstName: f.FirstName, LastName: f.LastName,
		CompanyName: f.CompanyName, JobTitle: f.JobTitle, ExternalID: f.ExternalID, CustomFields: f.CustomFields,
	}
	arg.Key, arg.RequestHash, arg.LockKey, arg.FreshSince = key.Args()
	var row dbsqlc.Contact
	for attempt := 1; ; attempt++ {
		row, err = db.Q.ContactCreate(ctx, s.DB.Conn(), arg)
		if !IsConflict(err) {
			break
		}
		switch err = Duplicate(ctx, s.DB, p.WorkspaceID, f, nil); {
		case errors.Is(err, rounds.ErrConflictGone) && attempt < rounds.WriteAttempts:
			continue
		case errors.Is(err, rounds.ErrConflictGone):
			return nil, rounds.ConflictsKeepMoving(err)
		}
		return nil, err
	}
	if refused := idempotency.Refusal(err); refused != nil {
		return nil, refused
	}
	if err != nil {
		return nil, fmt.Errorf("create contact: %w", err)
	}
	res := connect.NewResponse(&contactv1.CreateContactResponse{Contact: ToProto(row, defs.ByKey)})
	res.Header().Set("Location", URL(row.ID))
	res.Header().Set(etag.Header, ETag(row))
	// A row other than the one proposed is the stored answer of the key.
	if row.ID != arg.ID {
		res.Header().Set(idempotency.ReplayedHeader, "true")
	}
	return res, nil
}

// ListContacts returns one keyset page.
func (s *Service) ListContacts(ctx context.Context, req *connect.Request[contactv1.ListContactsRequest]) (*connect.Response[contactv1.ListContactsResponse], error) {
	p := auth.FromContext(ctx)
	m := req.Msg
	var email, externalID *string
	filters := url.Values{}
	if m.GetEmail() != "" {
		var v validate.Errors
		// Only spaces trim to nothing (nil): that is no email either.
		email = v.Email("email", &m.Email)
		if email == nil || v.Err() != nil {
			return nil, listing.Invalid("email", "must be an email address")
		}
		filters.Set("email", *email)
	}
	if m.GetExternalId() != "" {
		var err error
		if externalID, err = listing.TextFilter("externalId", m.GetExternalId(), 1024); err != nil {
			return nil, err
		}
		filters.Set("externalId", *externalID)
	}
	search, err := listing.ParseSearch(m.GetQ())
	if err != nil {
		return nil, err
	}
	custom, err := customfield.Filters(ctx, s.DB.Conn(), p.WorkspaceID, customfield.Contact, m.GetCustomFields())
	if err != nil {
		return nil, err
	}
	search.Bind(filters)
	custom.Bind(filters)
	lp, err := listing.Parse(s.Cursors, p.WorkspaceID, "contacts", listing.Request{
		Limit: m.Limit, Sort: m.GetSort(), CreatedSince: m.GetCreatedSince(), UpdatedSince: m.GetUpdatedSince(),
		Cursor: m.GetCursor(), Filters: filters.Encode(),
	})
	if err != nil {
		return nil, err
	}
	// A standby that shows every write acknowledged before may serve it.
	rd, err := s.DB.Reader(ctx)
	if err != nil {
		return nil, fmt.Errorf("list contacts: %w", err)
	}
	defer rd.Close()
	if lp.Sort.Sync {
		rows, err := db.Q.ContactListChanges(ctx, rd.Planned(), dbsqlc.ContactListChangesParams{
			WorkspaceID: p.WorkspaceID, AfterXID: lp.AfterXID(), AfterTimeline: lp.AfterTimeline(), AfterPosition: lp.AfterWAL(), AfterID: lp.AfterID(),
			CreatedSince: lp.CreatedSince, UpdatedSince: lp.UpdatedSince, Email: email, ExternalID: externalID,
			CustomEq: custom.Eq, RangeKeys: custom.RangeKeys, RangeTypes: custom.RangeTypes, RangeGte: custom.RangeGte, RangeLte: custom.RangeLte,
			Q1: search.Indexed[0], Q2: search.Indexed[1], QRest: search.Rest,
			MaxRows: lp.Limit + 1,
		})
		if err != nil {
			if e := listing.HistoryExpired(err, "cursor"); e != nil {
				return nil, e
			}
			return nil, fmt.Errorf("list contact changes: %w", err)
		}
		page := make([]dbsqlc.Contact, len(rows))
		for i, r := range rows {
			page[i] = r.Contact
		}
		if len(rows) > 0 {
			lp = lp.ReadAt(listing.Origin{Timeline: rows[0].HistoryTimeline, WAL: rows[0].HistoryPosition})
		}
		return s.page(ctx, p.WorkspaceID, lp, page)
	}
	if at, id, ok := lp.Newest(); ok && email == nil && externalID == nil && custom.Empty() && search.Bound == "" {
		rows, err := db.Q.ContactListNewest(ctx, rd.Conn(), dbsqlc.ContactListNewestParams{
			WorkspaceID: p.WorkspaceID, AfterTime: at, AfterID: id, MaxRows: lp.Limit + 1,
		})
		if err != nil {
			return nil, fmt.Errorf("list contacts: %w", err)
		}
		return s.page(ctx, p.WorkspaceID, lp, rows)
	}
	args := dbsqlc.ContactListCreatedDescParams{
		WorkspaceID: p.WorkspaceID, AfterTime: lp.AfterTime(), AfterID: lp.AfterID(),
		CreatedSince: lp.CreatedSince, UpdatedSince: lp.UpdatedSince, Email: email, ExternalID: externalID,
		CustomEq: custom.Eq, RangeKeys: custom.RangeKeys, RangeTypes: custom.RangeTypes, RangeGte: custom.RangeGte, RangeLte: custom.RangeLte,
		Q1: search.Indexed[0], Q2: search.Indexed[1], QRest: search.Rest,
		MaxRows: lp.Limit + 1,
	}
	conn := rd.Planned()
	rows, err := listing.Query(lp,
		func() ([]dbsqlc.Contact, error) { return db.Q.ContactListCreatedDesc(ctx, conn, args) },
		func() ([]dbsqlc.Contact, error) {
			return db.Q.ContactListCreatedAsc(ctx, conn, dbsqlc.ContactListCreatedAscParams(args))
		},
		func() ([]dbsqlc.Contact, error) {
			return db.Q.ContactListUpdatedDesc(ctx, conn, dbsqlc.ContactListUpdatedDescParams(args))
		})
	if err != nil {
		return nil, fmt.Errorf("list contacts: %w", err)
	}
	return s.page(ctx, p.WorkspaceID, lp, rows)
}

// page renders one page of a list fetched with Limit+1 rows.
func (s *Service) page(ctx context.Context, ws uuid.UUID, lp listing.Params, rows []dbsqlc.Contact) (*connect.Response[contactv1.ListContactsResponse], error) {
	live, err := s.answerDefs(ctx, ws, rows...)
	if err != nil {
		return nil, err
	}
	rows, next, sync := listing.Next(s.Cursors, lp, rows, func(c dbsqlc.Contact) listing.Keys {
		return listing.Keys{CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, ChangeXID: c.ChangeXID, ID: c.ID}
	})
	out := &contactv1.ListContactsResponse{
		Contacts:   make([]*contactv1.Contact, 0, len(rows)),
		Pagination: &contactv1.Pagination{NextCursor: next, SyncCursor: sync},
	}
	for _, r := range rows {
		out.Contacts = append(out.Contacts, ToProto(r, live))
	}
	return connect.NewResponse(out), nil
}

// ToProto renders a contact row, with the values of the live fields (a
// deleted field's values are hidden); nil live renders every stored value
// (an event's copy of the row as written).
func ToProto(c dbsqlc.Contact, live map[string]customfield.Definition) *contactv1.Contact {
	return &contactv1.Contact{
		Id: opaqueid.Format(opaqueid.Contact, c.ID), Email: c.Email, Phone: c.Phone,
		FirstName: c.FirstName, LastName: c.LastName, CompanyName: c.CompanyName, JobTitle: c.JobTitle,
		ExternalId: c.ExternalID, CreatedAt: timestamppb.New(c.CreatedAt.UTC()), UpdatedAt: timestamppb.New(c.UpdatedAt.UTC()),
		CustomFields: customfield.Answer(live, c.CustomFields),
	}
}
