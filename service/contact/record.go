package contact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
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
	Writable: []string{"email", "phone", "first_name", "last_name", "company_name", "job_title", "external_id",
		"custom_fields", "custom_fields.*"},
	ReadOnly: map[string]string{"id": "is read-only", "created_at": "is read-only", "updated_at": "is read-only"},
}

func notFound() error {
	return apierror.New(apierror.CodeNotFound, "no contact with this id in this workspace")
}

// get reads a contact of the workspace. An id that is malformed, unknown or
// another workspace's is the same 404, so existence never leaks. It may
// be served by a standby that shows every write acknowledged before it
// ([db.DB.Reader]).
func (s *Service) get(ctx context.Context, ws uuid.UUID, id string) (dbsqlc.Contact, error) {
	r, err := s.DB.Reader(ctx)
	if err != nil {
		return dbsqlc.Contact{}, fmt.Errorf("get contact: %w", err)
	}
	defer r.Close()
	return s.getOn(ctx, r.Conn(), false, ws, id)
}

// getOn is get on q, locking the row when lock.
func (s *Service) getOn(ctx context.Context, q db.DBTX, lock bool, ws uuid.UUID, id string) (dbsqlc.Contact, error) {
	uid, ok := opaqueid.Parse(opaqueid.Contact, id)
	if !ok {
		return dbsqlc.Contact{}, notFound()
	}
	var row dbsqlc.Contact
	var err error
	if lock {
		row, err = db.Q.ContactGetForUpdate(ctx, q, dbsqlc.ContactGetForUpdateParams{WorkspaceID: ws, ID: uid})
	} else {
		row, err = db.Q.ContactGet(ctx, q, dbsqlc.ContactGetParams{WorkspaceID: ws, ID: uid})
	}
	if errors.Is(err, db.ErrNotFound) {
		return row, notFound()
	}
	if err != nil {
		return row, fmt.Errorf("get contact: %w", err)
	}
	return row, nil
}

// GetContact returns one contact with its ETag.
func (s *Service) GetContact(ctx context.Context, req *connect.Request[contactv1.GetContactRequest]) (*connect.Response[contactv1.GetContactResponse], error) {
	ws := auth.FromContext(ctx).WorkspaceID
	row, err := s.get(ctx, ws, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	live, err := s.answerDefs(ctx, ws, row)
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(&contactv1.GetContactResponse{Contact: ToProto(row, live)})
	res.Header().Set(etag.Header, ETag(row))
	return res, nil
}

// UpdateContact applies the fields of update_mask to a contact: it reads
// the contact, checks If-Match, merges, validates the result as a create
// would, and writes it only if the contact did not change in between
// (otherwise it starts over, and a stale If-Match then fails). The last
// round locks the row from the read to the write, so that a busy record
// is still updated rather than refused.
func (s *Service) UpdateContact(ctx context.Context, req *connect.Request[contactv1.UpdateContactRequest]) (*connect.Response[contactv1.UpdateContactResponse], error) {
	ws := auth.FromContext(ctx).WorkspaceID
	in := req.Msg.GetContact()
	if in == nil {
		in = &contactv1.Contact{}
	}
	paths, err := fieldmask.Paths(req.Msg.GetUpdateMask(), in, updateRules)
	if err != nil {
		return nil, err
	}
	defs, err := s.defs(ctx, ws)
	if err != nil {
		return nil, err
	}
	u := updateReq{ws: ws, id: req.Msg.GetId(), ifMatch: req.Header().Values(etag.IfMatch), in: in, paths: paths, defs: defs}
	row, lost, err := rounds.Run(ctx, s.DB,
		func(q db.DBTX, lock bool) (dbsqlc.Contact, bool, error) { return s.update(ctx, q, lock, u) },
		func(err error) (bool, error) {
			if t := (*taken)(nil); errors.As(err, &t) {
				if err = Duplicate(ctx, s.DB, ws, t.fields, &t.self); errors.Is(err, rounds.ErrConflictGone) {
					return true, nil // its holder let go of the value: try again
				}
			}
			return false, err
		})
	switch {
	case lost:
		return nil, apierror.New(apierror.CodeFailedPrecondition, "the contact is being changed by other requests; retry")
	case err != nil:
		return nil, err
	}
	res := connect.NewResponse(&contactv1.UpdateContactResponse{Contact: ToProto(row, defs.ByKey)})
	res.Header().Set(etag.Header, ETag(row))
	return res, nil
}

// taken is an update's unique violation whose holder is still to be
// named (Duplicate).
type taken struct {
	fields Fields
	self   uuid.UUID
}

func (t *taken) Error() string { return "update contact: a unique value is taken" }

// updateReq is what an UpdateContact request asks for.
type updateReq struct {
	ws      uuid.UUID
	id      string
	ifMatch []string
	in      *contactv1.Contact
	paths   map[string]bool
	defs    customfield.Set
}

// update runs one round of u on q (see [rounds.Run]), reading the
// contact with a row lock when lock: it returns the contact as it is
// after the round, or again when the contact changed between the read and
// the write; a taken value is a *taken error, whose holder UpdateContact
// names once the round has ended.
func (s *Service) update(ctx context.Context, q db.DBTX, lock bool, u updateReq) (row dbsqlc.Contact, again bool, err error) {
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
	merged := ToProto(cur, nil)
	merged.CustomFields = nil
	set := func(path string, dst **string, v *string) {
		if u.paths[path] {
			*dst = v
		}
	}
	set("email", &merged.Email, u.in.Email)
	set("phone", &merged.Phone, u.in.Phone)
	set("first_name", &merged.FirstName, u.in.FirstName)
	set("last_name", &merged.LastName, u.in.LastName)
	set("company_name", &merged.CompanyName, u.in.CompanyName)
	set("job_title", &merged.JobTitle, u.in.JobTitle)
	set("external_id", &merged.ExternalId, u.in.ExternalId)
	var v validate.Errors
	f := checkFields(&v, merged)
	f.CustomFields = cur.CustomFields
	// written and liveKeys are what ContactUpdate writes of the values:
	// with liveKeys nil, it keeps the stored values.
	var written []byte
	var liveKeys []string
	if whole, keys := customfield.PatchPaths(u.paths); whole || len(keys) > 0 {
		stored, err := customfield.Decode(cur.CustomFields)
		if err != nil {
			return cur, false, fmt.Errorf("read custom values of contact: %w", err)
		}
		cf := u.defs.Checker()
		patched := cf.Patch(&v, "", stored, u.in.GetCustomFields(), whole, keys)
		if err := cf.Err(); err != nil {
			return cur, false, err
		}
		// A deleted field's value is no change: no answer shows it.
		if now := cf.Live(patched); len(customfield.Changed(cf.Live(stored), now)) > 0 {
			f.CustomFields = patched.Encode()
			written, liveKeys = now.Encode(), cf.LiveKeys()
		}
	}
	if err := v.Err(); err != nil {
		return cur, false, err
	}
	// A patch to the values the contact already has writes nothing: the
	// ETag and updatedAt stay, and a sync does not report the contact
	// again.
	if f.unchanged(cur) {
		return cur, false, nil
	}
	row, err = db.Q.ContactUpdate(ctx, q, dbsqlc.ContactUpdateParams{
		WorkspaceID: u.ws, ID: cur.ID, ExpectedXID: cur.ChangeXID,
		Email: f.Email, Phone: f.Phone, FirstName: f.FirstName, LastName: f.LastName,
		CompanyName: f.CompanyName, JobTitle: f.JobTitle, ExternalID: f.ExternalID,
		CustomFields: written, LiveKeys: liveKeys,
	})
	switch {
	case errors.Is(err, db.ErrNotFound):
		return cur, true, nil // changed since we read it: merge again
	case IsConflict(err):
		// Named by resolveTaken once this round's transaction has ended.
		return cur, false, &taken{fields: f, self: cur.ID}
	case err != nil:
		return cur, false, fmt.Errorf("update contact: %w", err)
	}
	return row, false, nil
}

// unchanged reports whether f are the fields c already has: a patch that
// merges to them changes nothing.
func (f Fields) unchanged(c dbsqlc.Contact) bool {
	return same(f.Email, c.Email) && same(f.Phone, c.Phone) && same(f.FirstName, c.FirstName) &&
		same(f.LastName, c.LastName) && same(f.CompanyName, c.CompanyName) && same(f.JobTitle, c.JobTitle) &&
		same(f.ExternalID, c.ExternalID) && bytes.Equal(f.CustomFields, c.CustomFields)
}

// same reports whether two optional values are both unset or equal.
func same[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// contactItem is one valid item of a batch.
type contactItem struct {
	idx               int32
	id                uuid.UUID
	email, externalID string
}

// BatchCreateContacts creates up to 100 contacts in one transaction of a
// few set-based statements. Each item ends as the single create of it would
// have: invalid items are refused before the database, and an item whose
// email or external id is taken, by an existing contact or another item,
// gets the 409 naming the holder. Items are written in lock order (by
// email, see ContactCreateMany), so of two items sharing an email the
// earlier one wins, and of two with different emails sharing an externalId
// the one with the lower email does. One Idempotency-Key covers the batch.
func (s *Service) BatchCreateContacts(ctx context.Context, req *connect.Request[contactv1.BatchCreateContactsRequest]) (*connect.Response[contactv1.BatchCreateContactsResponse], error) {
	p := auth.FromContext(ctx)
	in := req.Msg.GetContacts()
	if err := batch.CheckSize("contacts", len(in)); err != nil {
		return nil, err
	}
	key, err := idempotency.NewKey(p.WorkspaceID, p.ClientID, BatchPath, req.Header(), req.Msg)
	if err != nil {
		return nil, err
	}
	defs, err := s.defs(ctx, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	refused := make([]*contactv1.BatchCreateContactsResult, len(in))
	var items []contactItem
	create := dbsqlc.ContactCreateManyParams{WorkspaceID: p.WorkspaceID}
	for i, c := range in {
		f, err := check(c, defs)
		if err != nil {
			refused[i] = &contactv1.BatchCreateContactsResult{Result: &contactv1.BatchCreateContactsResult_Error{Error: batch.Problem(ctx, err)}}
			continue
		}
		it := contactItem{idx: int32(i), id: opaqueid.New(), email: batch.Text(f.Email), externalID: batch.Text(f.ExternalID)}
		items = append(items, it)
		create.Idx, create.IDs = append(create.Idx, it.idx), append(create.IDs, it.id.String())
		create.Emails, create.ExternalIDs = append(create.Emails, it.email), append(create.ExternalIDs, it.externalID)
		create.Phones, create.FirstNames = append(create.Phones, batch.Text(f.Phone)), append(create.FirstNames, batch.Text(f.FirstName))
		create.LastNames, create.CompanyNames = append(create.LastNames, batch.Text(f.LastName)), append(create.CompanyNames, batch.Text(f.CompanyName))
		create.JobTitles = append(create.JobTitles, batch.Text(f.JobTitle))
		create.CustomFields = append(create.CustomFields, string(f.CustomFields))
	}
	out := &contactv1.BatchCreateContactsResponse{}
	replayed, err := batch.Run(ctx, s.DB, key, out, func(tx db.DBTX) error {
		tx = db.PlannedTx(tx)
		out.Results = slices.Clone(refused)
		if len(items) == 0 {
			return nil
		}
		created, err := db.Q.ContactCreateMany(ctx, tx, create)
		if err != nil {
			return fmt.Errorf("create contacts: %w", err)
		}
		byID := make(map[uuid.UUID]dbsqlc.Contact, len(created))
		for _, c := range created {
			byID[c.ID] = c
		}
		createdBy := make(map[uuid.UUID]int32, len(created)) // contact id -> item
		skipped := dbsqlc.ContactConflictManyParams{WorkspaceID: p.WorkspaceID}
		externalIDs := map[int32]string{}
		for _, it := range items {
			if c, ok := byID[it.id]; ok {
				createdBy[c.ID] = it.idx
				out.Results[it.idx] = &contactv1.BatchCreateContactsResult{Result: &contactv1.BatchCreateContactsResult_Contact{Contact: ToProto(c, defs.ByKey)}}
			} else {
				skipped.Idx = append(skipped.Idx, it.idx)
				skipped.Emails, skipped.ExternalIDs = append(skipped.Emails, it.email), append(skipped.ExternalIDs, it.externalID)
				externalIDs[it.idx] = it.externalID
			}
		}
		for round := 0; len(skipped.Idx) > 0; round++ {
			if round == 2 {
				return db.ErrRetry // cannot happen: a second round asks by externalId alone
			}
			holders, err := db.Q.ContactConflictMany(ctx, tx, skipped)
			if err != nil {
				return fmt.Errorf("find conflicting contacts: %w", err)
			}
			// The holder of an item's email may be a later item with the
			// same email: the email was free at the item's turn, so its
			// externalId was what was taken, and its single create would
			// have named that one's holder. Those items are asked again,
			// by externalId alone, and the holder then named (an existing
			// contact, or an item inserted before it in lock order) is the
			// answer.
			again := dbsqlc.ContactConflictManyParams{WorkspaceID: p.WorkspaceID}
			for _, h := range holders {
				if h.ExistingID == nil {
					// The conflict we lost is gone (its transaction rolled
					// back after ours looked): run the batch again.
					return db.ErrRetry
				}
				if by, ok := createdBy[*h.ExistingID]; ok && by > h.Idx && round == 0 {
					again.Idx, again.Emails = append(again.Idx, h.Idx), append(again.Emails, "")
					again.ExternalIDs = append(again.ExternalIDs, externalIDs[h.Idx])
					continue
				}
				out.Results[h.Idx] = &contactv1.BatchCreateContactsResult{Result: &contactv1.BatchCreateContactsResult_Error{Error: batch.Problem(ctx, duplicate(*h.ExistingID, h.ByEmail))}}
			}
			skipped = again
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
