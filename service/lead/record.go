package lead

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/batch"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/etag"
	"github.com/svat/partnerapi/internal/records/fieldmask"
	"github.com/svat/partnerapi/internal/records/idempotency"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/rounds"
	"github.com/svat/partnerapi/internal/records/validate"
	"github.com/svat/partnerapi/internal/security/auth"
)

// BatchPath is the REST path of the batch create, which also scopes its
// idempotency keys.
const BatchPath = Path + "/batch"

var updateRules = fieldmask.Rules{
	Writable: []string{"contact_id", "title", "status", "source", "campaign", "message", "value", "value.amount",
		"value.currency", "external_id", "custom_fields", "custom_fields.*"},
	ReadOnly: map[string]string{
		"id": "is read-only", "created_at": "is read-only", "updated_at": "is read-only",
		"contact": "is accepted only on create; send contactId to move the lead to another contact",
	},
}

func notFound() error {
	return apierror.New(apierror.CodeNotFound, "no lead with this id in this workspace")
}

// get reads a lead of the workspace. An id that is malformed, unknown or
// another workspace's is the same 404, so existence never leaks. It may
// be served by a standby that shows every write acknowledged before it
// ([db.DB.Reader]).
func (s *Service) get(ctx context.Context, ws uuid.UUID, id string) (dbsqlc.Lead, error) {
	r, err := s.DB.Reader(ctx)
	if err != nil {
		return dbsqlc.Lead{}, fmt.Errorf("get lead: %w", err)
	}
	defer r.Close()
	return s.getOn(ctx, r.Conn(), false, ws, id)
}

// getOn is get on q, locking the row when lock.
func (s *Service) getOn(ctx context.Context, q db.DBTX, lock bool, ws uuid.UUID, id string) (dbsqlc.Lead, error) {
	uid, ok := opaqueid.Parse(opaqueid.Lead, id)
	if !ok {
		return dbsqlc.Lead{}, notFound()
	}
	var row dbsqlc.Lead
	var err error
	if lock {
		row, err = db.Q.LeadGetForUpdate(ctx, q, dbsqlc.LeadGetForUpdateParams{WorkspaceID: ws, ID: uid})
	} else {
		row, err = db.Q.LeadGet(ctx, q, dbsqlc.LeadGetParams{WorkspaceID: ws, ID: uid})
	}
	if errors.Is(err, db.ErrNotFound) {
		return row, notFound()
	}
	if err != nil {
		return row, fmt.Errorf("get lead: %w", err)
	}
	return row, nil
}

// GetLead returns one lead with its ETag.
func (s *Service) GetLead(ctx context.Context, req *connect.Request[leadv1.GetLeadRequest]) (*connect.Response[leadv1.GetLeadResponse], error) {
	ws := auth.FromContext(ctx).WorkspaceID
	row, err := s.get(ctx, ws, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	live, err := s.answerDefs(ctx, ws, row)
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(&leadv1.GetLeadResponse{Lead: ToProto(row, live)})
	res.Header().Set(etag.Header, ETag(row))
	return res, nil
}

// UpdateLead applies the fields of update_mask to a lead: it reads the
// lead, checks If-Match, merges, validates the result as a create would,
// and writes it only if the lead did not change in between (otherwise it
// starts over, and a stale If-Match then fails). The last round locks the
// row from the read to the write, so that a busy lead is still updated
// rather than refused. A field with a default (title, status) that is
// cleared gets its default again (a title its contact's name only for a
// caller with contacts:read: see newLead.defaultTitle); contactId cannot
// be cleared.
func (s *Service) UpdateLead(ctx context.Context, req *connect.Request[leadv1.UpdateLeadRequest]) (*connect.Response[leadv1.UpdateLeadResponse], error) {
	p := auth.FromContext(ctx)
	ws := p.WorkspaceID
	in := req.Msg.GetLead()
	if in == nil {
		in = &leadv1.Lead{}
	}
	paths, err := fieldmask.Paths(req.Msg.GetUpdateMask(), in, updateRules)
	if err != nil {
		return nil, err
	}
	defs, err := s.fieldSets(ctx, ws, false)
	if err != nil {
		return nil, err
	}
	u := updateReq{ws: ws, id: req.Msg.GetId(), ifMatch: req.Header().Values(etag.IfMatch), in: in, paths: paths,
		readsContacts: readsContacts(p), defs: defs.lead}
	row, lost, err := rounds.Run(ctx, s.DB,
		func(q db.DBTX, lock bool) (dbsqlc.Lead, bool, error) { return s.update(ctx, q, lock, u) },
		func(err error) (bool, error) {
			if t := (*taken)(nil); errors.As(err, &t) {
				if err = s.takenError(ctx, ws, t.lead, t.err); errors.Is(err, rounds.ErrConflictGone) {
					return true, nil // its holder let go of the external id: try again
				}
			}
			return false, err
		})
	switch {
	case lost:
		return nil, apierror.New(apierror.CodeFailedPrecondition, "the lead is being changed by other requests; retry")
	case err != nil:
		return nil, err
	}
	res := connect.NewResponse(&leadv1.UpdateLeadResponse{Lead: ToProto(row, defs.lead.ByKey)})
	res.Header().Set(etag.Header, ETag(row))
	return res, nil
}

// taken is an update's unique violation whose holder is still to be
// named (takenError).
type taken struct {
	lead newLead
	err  error
}

func (t *taken) Error() string { return "update lead: " + t.err.Error() }

func (t *taken) Unwrap() error { return t.err }

// updateReq is what an UpdateLead request asks for.
type updateReq struct {
	ws      uuid.UUID
	id      string
	ifMatch []string
	in      *leadv1.Lead
	paths   map[string]bool
	// readsContacts: the caller may read contacts, and so a cleared title
	// may become the contact's name (else it is [neutralTitle]).
	readsContacts bool
	// defs are the live lead fields the patch's values are checked
	// against.
	defs customfield.Set
}

// update runs one round of u on q (see [rounds.Run]), reading the lead
// with a row lock when lock: it returns the lead as it is after the round,
// or again when the lead changed between the read and the write; a taken
// external id is a *taken error, whose holder UpdateLead names once the
// round has ended.
func (s *Service) update(ctx context.Context, q db.DBTX, lock bool, u updateReq) (row dbsqlc.Lead, again bool, err error) {
	cur, err := s.getOn(ctx, q, lock, u.ws, u.id)
	if err != nil {
		return cur, false, err
	}
	if err := etag.Check(u.ifMatch, ETag(cur)); err != nil {
		return cur, false, err
	}
	if len(u.paths) == 0 {
		return cur, false, nil
	}
	merged := merge(ToProto(cur, nil), u.in, u.paths)
	merged.CustomFields = nil
	l, err := check(merged, fieldSets{})
	if err != nil {
		return cur, false, err
	}
	l.values = cur.CustomFields
	// written and liveKeys are what LeadUpdate writes of the values: with
	// liveKeys nil, it keeps the stored values.
	var written []byte
	var liveKeys []string
	if whole, keys := customfield.PatchPaths(u.paths); whole || len(keys) > 0 {
		stored, err := customfield.Decode(cur.CustomFields)
		if err != nil {
			return cur, false, fmt.Errorf("read custom values of lead: %w", err)
		}
		var v validate.Errors
		cf := u.defs.Checker()
		patched := cf.Patch(&v, "", stored, u.in.GetCustomFields(), whole, keys)
		if err := cf.Err(); err != nil {
			return cur, false, err
		}
		if err := v.Err(); err != nil {
			return cur, false, err
		}
		// A deleted field's value is no change: no answer shows it.
		if now := cf.Live(patched); len(customfield.Changed(cf.Live(stored), now)) > 0 {
			l.values = patched.Encode()
			written, liveKeys = now.Encode(), cf.LiveKeys()
		}
	}
	l.defaultTitle(u.readsContacts)
	if l.title == nil {
		// A cleared title is the default again: resolved here, so that
		// clearing one that already is the default writes nothing, as any
		// patch to the values a lead has.
		title, err := db.Q.LeadDefaultTitle(ctx, q, dbsqlc.LeadDefaultTitleParams{WorkspaceID: u.ws, ContactID: *l.contactID})
		switch {
		case errors.Is(err, db.ErrNotFound):
			return cur, false, noContact()
		case err != nil:
			return cur, false, fmt.Errorf("get default title: %w", err)
		}
		l.title = &title
	}
	// A patch to the values the lead already has writes nothing: the ETag
	// and updatedAt stay, and a sync does not report the lead again.
	if l.unchanged(cur) {
		return cur, false, nil
	}
	row, err = db.Q.LeadUpdate(ctx, q, dbsqlc.LeadUpdateParams{
		WorkspaceID: u.ws, ID: cur.ID, ExpectedXID: cur.ChangeXID, ContactID: *l.contactID,
		Title: l.title, Status: l.status, Source: l.source, Campaign: l.campaign, Message: l.msg,
		ValueAmount: l.amount, ValueCurrency: l.currency, ExternalID: l.externalID,
		CustomFields: written, LiveKeys: liveKeys,
	})
	var conflict *db.ConflictError
	switch {
	case errors.Is(err, db.ErrNotFound):
		return cur, true, nil // changed since we read it: merge again
	case errors.As(err, &conflict) && conflict.ForeignKey:
		return cur, false, noContact()
	case errors.As(err, &conflict):
		// Named by takenError once this round's transaction has ended.
		return cur, false, &taken{lead: l, err: err}
	case err != nil:
		return cur, false, fmt.Errorf("update lead: %w", err)
	}
	return row, false, nil
}

// unchanged reports whether l, merged and checked (with a cleared title
// resolved to its default), is what r already holds.
func (l newLead) unchanged(r dbsqlc.Lead) bool {
	return l.contactID != nil && *l.contactID == r.ContactID && l.title != nil && *l.title == r.Title &&
		l.status == r.Status && same(l.source, r.Source) && same(l.campaign, r.Campaign) && same(l.msg, r.Message) &&
		same(l.amount, r.ValueAmount) && same(l.currency, r.ValueCurrency) && same(l.externalID, r.ExternalID) &&
		bytes.Equal(l.values, r.CustomFields)
}

// same reports whether two optional values are both unset or equal.
func same[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// merge returns cur with the fields paths name taken from in.
func merge(cur, in *leadv1.Lead, paths map[string]bool) *leadv1.Lead {
	set := func(path string, dst **string, v *string) {
		if paths[path] {
			*dst = v
		}
	}
	if paths["contact_id"] {
		cur.ContactId = in.GetContactId()
	}
	set("title", &cur.Title, in.Title)
	set("status", &cur.Status, in.Status)
	set("source", &cur.Source, in.Source)
	set("campaign", &cur.Campaign, in.Campaign)
	set("message", &cur.Message, in.Message)
	set("external_id", &cur.ExternalId, in.ExternalId)
	if paths["value"] {
		cur.Value = in.GetValue()
	}
	if paths["value.amount"] || paths["value.currency"] {
		v := &leadv1.Money{}
		if cur.Value != nil {
			v = proto.Clone(cur.Value).(*leadv1.Money)
		}
		if paths["value.amount"] {
			v.Amount = in.GetValue().GetAmount()
		}
		if paths["value.currency"] {
			v.Currency = in.GetValue().GetCurrency()
		}
		cur.Value = v
	}
	return cur
}

func result(l *leadv1.Lead) *leadv1.BatchCreateLeadsResult {
	return &leadv1.BatchCreateLeadsResult{Result: &leadv1.BatchCreateLeadsResult_Lead{Lead: l}}
}

func failure(ctx context.Context, err error) *leadv1.BatchCreateLeadsResult {
	return &leadv1.BatchCreateLeadsResult{Result: &leadv1.BatchCreateLeadsResult_Error{Error: batch.Problem(ctx, err)}}
}

// BatchCreateLeads ingests up to 100 leads in one transaction, through
// the path of a single create (lead_create_item_set: see create.go), which
// handles the items together in a few set-based statements. Each item ends
// as its single create would have: invalid items are refused before the
// database, an unknown contactId is a 422, an external id taken by an
// existing lead or an earlier item is a 409 naming the holder, and an
// inline contact created only for leads that failed is removed again. One
// Idempotency-Key covers the batch.
func (s *Service) BatchCreateLeads(ctx context.Context, req *connect.Request[leadv1.BatchCreateLeadsRequest]) (*connect.Response[leadv1.BatchCreateLeadsResponse], error) {
	p := auth.FromContext(ctx)
	in := req.Msg.GetLeads()
	if err := batch.CheckSize("leads", len(in)); err != nil {
		return nil, err
	}
	reads := readsContacts(p)
	key, err := newKey(p, BatchPath, req.Header(), req.Msg, reads)
	if err != nil {
		return nil, err
	}
	inline := false
	for _, x := range in {
		inline = inline || x.GetContact() != nil
	}
	defs, err := s.fieldSets(ctx, p.WorkspaceID, inline)
	if err != nil {
		return nil, err
	}
	refused := make([]*leadv1.BatchCreateLeadsResult, len(in))
	items := make([]dbsqlc.LeadCreateParams, 0, len(in))
	answers := make([]map[string]*structpb.Value, 0, len(in)) // each of items' values answered
	idx := make([]int, 0, len(in))                            // the request index of each of items
	for i, x := range in {
		if x == nil {
			x = &leadv1.Lead{}
		}
		l, err := check(x, defs)
		if err != nil {
			refused[i] = failure(ctx, err)
			continue
		}
		l.defaultTitle(reads)
		items = append(items, l.params(p, BatchPath))
		answers = append(answers, l.answer)
		idx = append(idx, i)
	}
	out := &leadv1.BatchCreateLeadsResponse{}
	replayed, err := batch.Run(ctx, s.DB, key, out, func(tx db.DBTX) error {
		out.Results = slices.Clone(refused)
		if len(items) == 0 {
			return nil
		}
		outcomes, err := createSet(ctx, db.PlannedTx(tx), p.WorkspaceID, items)
		var conflict *db.ConflictError
		if errors.As(err, &conflict) && conflict.ForeignKey {
			// A contact an item found was deleted before its lead's
			// foreign-key check: run the batch again, which finds it gone.
			return db.ErrRetry
		}
		if err != nil {
			return fmt.Errorf("create leads: %w", err)
		}
		for _, o := range outcomes {
			l, err := answer(o)
			switch {
			case errors.Is(err, rounds.ErrConflictGone):
				// The conflict we lost is gone (its transaction rolled
				// back after ours looked): run the batch again.
				return db.ErrRetry
			case err != nil:
				out.Results[idx[o.Idx]] = failure(ctx, err)
			default:
				out.Results[idx[o.Idx]] = result(answerCreated(l, items[o.Idx].ID, defs.lead.ByKey, answers[o.Idx]))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(out)
	if replayed {
		res.Header().Set(idempotency.ReplayedHeader, "true")
	}
	return res, nil
}
