// Package lead implements partner.lead.v1.LeadService: lead ingestion
// (with an inline contact found by email or created) and keyset lists.
package lead

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
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
	"github.com/svat/partnerapi/internal/security/scope"
)

// Path is the REST path, which also scopes idempotency keys.
const Path = "/api/v1/leads"

// Statuses lists the lead statuses as the API spells them, in the order
// of the enum partner.lead.v1.LeadStatus, from which they are derived (its
// one list); the first is the default.
var Statuses = validate.EnumValues(leadv1.LeadStatus_LEAD_STATUS_UNSPECIFIED.Descriptor())

// Service is the lead service.
type Service struct {
	DB      *db.DB
	Cursors listing.Cursors
	// Writer runs the single creates, sharing commits under load; nil
	// runs each create on its own.
	Writer *Writer
}

var _ leadv1connect.LeadServiceHandler = (*Service)(nil)

type newLead struct {
	contactID             *uuid.UUID
	inline                *person.Fields
	title                 *string
	status                string
	source, campaign, msg *string
	amount                *int64
	currency              *string
	externalID            *string
	// values and contactValues are the lead's and its inline contact's
	// custom values as stored (nil for none).
	values, contactValues []byte
	// answer is the lead's values as the create answers them
	// (customfield.AnswerChecked): a created lead's answer needs no
	// decoding of what was just stored.
	answer map[string]*structpb.Value
}

// fieldSets are the live custom fields a create's values are checked
// against: the lead's, and the contact's for an inline contact.
type fieldSets struct{ lead, contact customfield.Set }

// fieldSets reads the live fields a create needs (cached: see
// customfield.Cached); the contact's only when inline.
func (s *Service) fieldSets(ctx context.Context, ws uuid.UUID, inline bool) (fieldSets, error) {
	var out fieldSets
	var err error
	if out.lead, err = customfield.Cached(ctx, s.DB.Conn(), ws, customfield.Lead); err != nil {
		return out, fmt.Errorf("read lead fields: %w", err)
	}
	if inline {
		if out.contact, err = customfield.Cached(ctx, s.DB.Conn(), ws, customfield.Contact); err != nil {
			return out, fmt.Errorf("read contact fields: %w", err)
		}
	}
	return out, nil
}

// answerDefs are the live fields an answer of rows shows values of: none
// to read when no row holds a value.
func (s *Service) answerDefs(ctx context.Context, ws uuid.UUID, rows ...dbsqlc.Lead) (map[string]customfield.Definition, error) {
	for _, r := range rows {
		if r.CustomFields != nil {
			set, err := customfield.Cached(ctx, s.DB.Conn(), ws, customfield.Lead)
			if err != nil {
				return nil, fmt.Errorf("read lead fields: %w", err)
			}
			return set.ByKey, nil
		}
	}
	return nil, nil
}

// check validates and normalises a new lead, its custom values (and its
// inline contact's) against defs: a malformed value (400) before any rule
// broken (422). An update checks the lead it would make with no defs, and
// patches the values itself.
func check(in *leadv1.Lead, defs fieldSets) (newLead, error) {
	var v validate.Errors
	var bad []apierror.FieldViolation
	l := newLead{status: Statuses[0]}
	switch {
	case in.GetContactId() != "" && in.GetContact() != nil:
		v.Add("contactId", validate.InvalidValue, "send either contactId or contact, not both")
	case in.GetContactId() != "":
		id, ok := opaqueid.Parse(opaqueid.Contact, strings.TrimSpace(in.GetContactId()))
		switch {
		case !ok:
			v.Add("contactId", validate.InvalidFormat, "must be a contact id like con_…")
		case id == uuid.Nil:
			// Well-formed, but no record has the nil UUID: refused here
			// as the database would, without asking it.
			v.Add("contactId", validate.NotFound, "no such contact in this workspace")
		}
		l.contactID = &id
	case in.GetContact() != nil:
		c := in.GetContact()
		f := person.Check(&v, "contact.", c.Email, c.Phone, c.FirstName, c.LastName, c.CompanyName, c.JobTitle)
		l.inline = &f
		cc := defs.contact.Checker()
		l.contactValues = cc.Create(&v, "contact.", c.GetCustomFields()).Encode()
		bad = append(bad, cc.Bad...)
	default:
		v.Add("contactId", validate.Required, "contactId or contact is required")
	}
	l.title = v.Text("title", in.Title, 255)
	if s := v.Text("status", in.Status, 32); s != nil {
		l.status = *s
		if !validStatus(*s) {
			v.Add("status", validate.InvalidValue, "must be one of "+strings.Join(Statuses, ", "))
		}
	}
	if l.source = v.Text("source", in.Source, 64); l.source != nil && !validate.ValidSlug(*l.source) {
		v.Add("source", validate.InvalidFormat, "must be a slug of lower-case letters, digits, _ and -, such as web_form")
	}
	l.campaign = v.Text("campaign", in.Campaign, 255)
	l.msg = v.MultilineText("message", in.Message, 5000)
	l.externalID = v.Text("externalId", in.ExternalId, 255)
	if val := in.GetValue(); val != nil {
		if val.GetAmount() < 0 {
			v.Add("value.amount", validate.InvalidValue, "must be an integer number of minor units, 0 or more")
		}
		cur := strings.ToUpper(strings.TrimSpace(val.GetCurrency()))
		if !validate.ValidCurrency(cur) {
			v.Add("value.currency", validate.InvalidValue, "must be an ISO 4217 currency code such as USD")
		}
		amount := int64(val.GetAmount())
		l.amount, l.currency = &amount, &cur
	}
	lc := defs.lead.Checker()
	vals := lc.Create(&v, "", in.GetCustomFields())
	l.values = vals.Encode()
	if lc.Bad = append(bad, lc.Bad...); len(lc.Bad) > 0 {
		return l, lc.Err()
	}
	if err := v.Err(); err != nil {
		return l, err
	}
	l.answer = customfield.AnswerChecked(vals, in.GetCustomFields())
	return l, nil
}

// neutralTitle is the default title of a lead about a contact the caller
// may not read and said nothing about: sent with a contactId alone by a
// token without contacts:read, or cleared by one. It is
// lead_default_title's last resort (migration 00010).
const neutralTitle = "Lead"

// readsContacts reports whether p may read contacts (contacts:read), and
// so be answered a lead whose default title is made from its contact as
// stored.
func readsContacts(p *auth.Principal) bool { return p.Scopes.Has(scope.ContactsRead) }

// defaultTitle gives l, when it has no title and reads is false, the
// default made only from what the request said: the inline contact's
// "First Last", else its email or phone, as lead_default_title (migration
// 00010), else [neutralTitle]. The stored contact's fields (the default the
// database makes when the title is NULL) would show a caller without
// contacts:read what it has no scope to read, and whether an inline
// contact's email is already a contact's. It is resolved here, before the
// database, so that every path (a single create alone or in a group, a
// batch, a patch) takes it as an ordinary title, at no cost.
func (l *newLead) defaultTitle(reads bool) {
	if l.title != nil || reads {
		return
	}
	t := neutralTitle
	if c := l.inline; c != nil {
		switch {
		case c.FirstName != nil || c.LastName != nil:
			t = strings.TrimSpace(orEmpty(c.FirstName) + " " + orEmpty(c.LastName))
		case c.Email != nil:
			t = *c.Email
		case c.Phone != nil:
			t = *c.Phone
		}
	}
	l.title = &t
}

// orEmpty is *s, or "" when s is nil.
func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func validStatus(s string) bool {
	for _, x := range Statuses {
		if s == x {
			return true
		}
	}
	return false
}

// CreateLead creates a lead, and its contact when sent inline.
func (s *Service) CreateLead(ctx context.Context, req *connect.Request[leadv1.CreateLeadRequest]) (*connect.Response[leadv1.CreateLeadResponse], error) {
	p := auth.FromContext(ctx)
	in := req.Msg.GetLead()
	if in == nil {
		in = &leadv1.Lead{}
	}
	defs, err := s.fieldSets(ctx, p.WorkspaceID, in.GetContact() != nil)
	if err != nil {
		return nil, err
	}
	l, err := check(in, defs)
	if err != nil {
		return nil, err
	}
	reads := readsContacts(p)
	l.defaultTitle(reads)
	key, err := newKey(p, Path, req.Header(), req.Msg, reads)
	if err != nil {
		return nil, err
	}
	arg := l.params(p, Path)
	arg.Key, arg.RequestHash, arg.LockKey, arg.FreshSince = key.Args()
	var row dbsqlc.Lead
	for attempt := 1; ; attempt++ {
		row, err = s.create(ctx, arg)
		if !errors.Is(err, rounds.ErrConflictGone) {
			break
		}
		// The lead holding the externalId let go of it while we looked:
		// try again.
		if attempt == rounds.WriteAttempts {
			return nil, rounds.ConflictsKeepMoving(err)
		}
	}
	if err != nil {
		return nil, createFailed(err)
	}
	res := connect.NewResponse(&leadv1.CreateLeadResponse{Lead: answerCreated(row, arg.ID, defs.lead.ByKey, l.answer)})
	res.Header().Set("Location", URL(row.ID))
	res.Header().Set(etag.Header, ETag(row))
	// A row other than the one proposed is the stored answer of the key.
	if row.ID != arg.ID {
		res.Header().Set(idempotency.ReplayedHeader, "true")
	}
	return res, nil
}

// newKey is the request's [idempotency.Key], bound also to whether the
// caller reads contacts, since that decides the default title: the stored
// answer of a create by a token of the client with contacts:read may name
// the stored contact, and must not be replayed to a token of the same
// client without it, which is refused as another request instead.
func newKey(p *auth.Principal, path string, header http.Header, msg proto.Message, reads bool) (idempotency.Key, error) {
	key, err := idempotency.NewKey(p.WorkspaceID, p.ClientID, path, header, msg)
	if err != nil || reads {
		return key, err
	}
	return key.Vary("without contacts:read"), nil
}

// create runs one create through the Writer, which shares commits between
// concurrent creates, or alone when the service has none (tests).
func (s *Service) create(ctx context.Context, arg dbsqlc.LeadCreateParams) (dbsqlc.Lead, error) {
	if s.Writer == nil {
		return createAlone(ctx, s.DB.Conn(), arg)
	}
	return s.Writer.Create(ctx, arg)
}

// createFailed is the API error of a create that failed with err (see
// [answer]): an idempotency refusal, or err itself.
func createFailed(err error) error {
	if refused := idempotency.Refusal(err); refused != nil {
		return refused
	}
	if e := (*apierror.Error)(nil); errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("create lead: %w", err)
}

// takenError is the 409 of an update whose external id another lead holds,
// naming the holder; it is [rounds.ErrConflictGone] when no lead holds it
// any more.
func (s *Service) takenError(ctx context.Context, ws uuid.UUID, l newLead, err error) error {
	var conflict *db.ConflictError
	if !errors.As(err, &conflict) || conflict.Constraint != "leads_external_id" {
		return fmt.Errorf("update lead: %w", err)
	}
	existing, lerr := db.Q.LeadIDByExternalID(ctx, s.DB.Conn(), dbsqlc.LeadIDByExternalIDParams{WorkspaceID: ws, ExternalID: l.externalID})
	if errors.Is(lerr, db.ErrNotFound) {
		return rounds.ErrConflictGone
	}
	if lerr != nil {
		return fmt.Errorf("find conflicting lead: %w", lerr)
	}
	return duplicate(existing)
}

// ListLeads returns one keyset page.
func (s *Service) ListLeads(ctx context.Context, req *connect.Request[leadv1.ListLeadsRequest]) (*connect.Response[leadv1.ListLeadsResponse], error) {
	p := auth.FromContext(ctx)
	m := req.Msg
	filters := url.Values{}
	args := dbsqlc.LeadListCreatedDescParams{WorkspaceID: p.WorkspaceID}
	if m.GetContactId() != "" {
		id, ok := opaqueid.Parse(opaqueid.Contact, m.GetContactId())
		if !ok {
			return nil, listing.Invalid("contactId", "must be a contact id like con_…")
		}
		args.ContactID = &id
		filters.Set("contactId", m.GetContactId())
	}
	if m.GetStatus() != "" {
		if !validStatus(m.GetStatus()) {
			return nil, listing.Invalid("status", "must be one of "+strings.Join(Statuses, ", "))
		}
		args.Status = &m.Status
		filters.Set("status", m.GetStatus())
	}
	if m.GetSource() != "" {
		if len(m.GetSource()) > 64 || !validate.ValidSlug(m.GetSource()) {
			return nil, listing.Invalid("source", "must be a source slug such as web_form")
		}
		args.Source = &m.Source
		filters.Set("source", m.GetSource())
	}
	if m.GetExternalId() != "" {
		var err error
		if args.ExternalID, err = listing.TextFilter("externalId", m.GetExternalId(), 1024); err != nil {
			return nil, err
		}
		filters.Set("externalId", *args.ExternalID)
	}
	search, err := listing.ParseSearch(m.GetQ())
	if err != nil {
		return nil, err
	}
	custom, err := customfield.Filters(ctx, s.DB.Conn(), p.WorkspaceID, customfield.Lead, m.GetCustomFields())
	if err != nil {
		return nil, err
	}
	search.Bind(filters)
	custom.Bind(filters)
	args.CustomEq, args.RangeKeys, args.RangeTypes = custom.Eq, custom.RangeKeys, custom.RangeTypes
	args.RangeGte, args.RangeLte = custom.RangeGte, custom.RangeLte
	args.Q1, args.Q2, args.QRest = search.Indexed[0], search.Indexed[1], search.Rest
	lp, err := listing.Parse(s.Cursors, p.WorkspaceID, "leads", listing.Request{
		Limit: m.Limit, Sort: m.GetSort(), CreatedSince: m.GetCreatedSince(), UpdatedSince: m.GetUpdatedSince(),
		Cursor: m.GetCursor(), Filters: filters.Encode(),
	})
	if err != nil {
		return nil, err
	}
	// A standby that shows every write acknowledged before may serve it.
	rd, err := s.DB.Reader(ctx)
	if err != nil {
		return nil, fmt.Errorf("list leads: %w", err)
	}
	defer rd.Close()
	if lp.Sort.Sync {
		rows, err := db.Q.LeadListChanges(ctx, rd.Planned(), dbsqlc.LeadListChangesParams{
			WorkspaceID: p.WorkspaceID, AfterXID: lp.AfterXID(), AfterTimeline: lp.AfterTimeline(), AfterPosition: lp.AfterWAL(), AfterID: lp.AfterID(),
			CreatedSince: lp.CreatedSince, UpdatedSince: lp.UpdatedSince, ContactID: args.ContactID,
			Status: args.Status, Source: args.Source, ExternalID: args.ExternalID,
			CustomEq: args.CustomEq, RangeKeys: args.RangeKeys, RangeTypes: args.RangeTypes, RangeGte: args.RangeGte, RangeLte: args.RangeLte,
			Q1: args.Q1, Q2: args.Q2, QRest: args.QRest, MaxRows: lp.Limit + 1,
		})
		if err != nil {
			if e := listing.HistoryExpired(err, "cursor"); e != nil {
				return nil, e
			}
			return nil, fmt.Errorf("list lead changes: %w", err)
		}
		page := make([]dbsqlc.Lead, len(rows))
		for i, r := range rows {
			page[i] = r.Lead
		}
		if len(rows) > 0 {
			lp = lp.ReadAt(listing.Origin{Timeline: rows[0].HistoryTimeline, WAL: rows[0].HistoryPosition})
		}
		return s.page(ctx, p.WorkspaceID, lp, page)
	}
	if at, id, ok := lp.Newest(); ok && args.ContactID == nil && args.Status == nil && args.Source == nil && args.ExternalID == nil &&
		custom.Empty() && search.Bound == "" {
		rows, err := db.Q.LeadListNewest(ctx, rd.Conn(), dbsqlc.LeadListNewestParams{
			WorkspaceID: p.WorkspaceID, AfterTime: at, AfterID: id, MaxRows: lp.Limit + 1,
		})
		if err != nil {
			return nil, fmt.Errorf("list leads: %w", err)
		}
		return s.page(ctx, p.WorkspaceID, lp, rows)
	}
	args.AfterTime, args.AfterID = lp.AfterTime(), lp.AfterID()
	args.CreatedSince, args.UpdatedSince = lp.CreatedSince, lp.UpdatedSince
	args.MaxRows = lp.Limit + 1
	conn := rd.Planned()
	rows, err := listing.Query(lp,
		func() ([]dbsqlc.Lead, error) { return db.Q.LeadListCreatedDesc(ctx, conn, args) },
		func() ([]dbsqlc.Lead, error) {
			return db.Q.LeadListCreatedAsc(ctx, conn, dbsqlc.LeadListCreatedAscParams(args))
		},
		func() ([]dbsqlc.Lead, error) {
			return db.Q.LeadListUpdatedDesc(ctx, conn, dbsqlc.LeadListUpdatedDescParams(args))
		})
	if err != nil {
		return nil, fmt.Errorf("list leads: %w", err)
	}
	return s.page(ctx, p.WorkspaceID, lp, rows)
}

// page renders one page of a list fetched with Limit+1 rows.
func (s *Service) page(ctx context.Context, ws uuid.UUID, lp listing.Params, rows []dbsqlc.Lead) (*connect.Response[leadv1.ListLeadsResponse], error) {
	live, err := s.answerDefs(ctx, ws, rows...)
	if err != nil {
		return nil, err
	}
	rows, next, sync := listing.Next(s.Cursors, lp, rows, func(l dbsqlc.Lead) listing.Keys {
		return listing.Keys{CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt, ChangeXID: l.ChangeXID, ID: l.ID}
	})
	out := &leadv1.ListLeadsResponse{
		Leads:      make([]*leadv1.Lead, 0, len(rows)),
		Pagination: &leadv1.Pagination{NextCursor: next, SyncCursor: sync},
	}
	for _, r := range rows {
		out.Leads = append(out.Leads, ToProto(r, live))
	}
	return connect.NewResponse(out), nil
}

func noContact() error {
	return apierror.Validation(apierror.FieldViolation{Field: "contactId", Code: validate.NotFound, Message: "no such contact in this workspace"})
}

func duplicate(existing uuid.UUID) error {
	return &apierror.Error{
		Code: apierror.CodeDuplicate, Message: "a lead with this externalId already exists",
		ExistingID: opaqueid.Format(opaqueid.Lead, existing),
		Fields:     []apierror.FieldViolation{{Field: "externalId", Code: "duplicate", Message: "a lead with this externalId already exists"}},
	}
}

// URL is the REST address of a lead, for the Location of a create.
func URL(id uuid.UUID) string { return Path + "/" + opaqueid.Format(opaqueid.Lead, id) }

// ETag is the entity tag of a lead's current version.
func ETag(l dbsqlc.Lead) string { return etag.Of(l.ID, l.ChangeXID, l.UpdatedAt) }

// ToProto renders a lead row, with the values of the live fields (a
// deleted field's values are hidden; nil live renders every stored value,
// as an event's copy of the row). The contact is referenced by id only.
func ToProto(l dbsqlc.Lead, live map[string]customfield.Definition) *leadv1.Lead {
	return toProto(l, customfield.Answer(live, l.CustomFields))
}

// answerCreated is the answer of a create that proposed the id proposed, with
// its checked values' answer: [ToProto], with the values answered as
// checked when the row is the lead the create inserted (not a stored
// answer under its key, which has another id).
func answerCreated(l dbsqlc.Lead, proposed uuid.UUID, live map[string]customfield.Definition, answer map[string]*structpb.Value) *leadv1.Lead {
	if l.ID != proposed {
		return ToProto(l, live)
	}
	return toProto(l, answer)
}

func toProto(l dbsqlc.Lead, values map[string]*structpb.Value) *leadv1.Lead {
	out := &leadv1.Lead{
		Id: opaqueid.Format(opaqueid.Lead, l.ID), ContactId: opaqueid.Format(opaqueid.Contact, l.ContactID),
		Title: &l.Title, Status: &l.Status, Source: l.Source, Campaign: l.Campaign, Message: l.Message,
		ExternalId: l.ExternalID, CreatedAt: timestamppb.New(l.CreatedAt.UTC()), UpdatedAt: timestamppb.New(l.UpdatedAt.UTC()),
		CustomFields: values,
	}
	if l.ValueAmount != nil && l.ValueCurrency != nil {
		out.Value = &leadv1.Money{Amount: int32(*l.ValueAmount), Currency: *l.ValueCurrency}
	}
	return out
}
