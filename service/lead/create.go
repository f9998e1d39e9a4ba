package lead

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/rounds"
	"github.com/svat/partnerapi/internal/security/auth"
)

// A lead is created one way, whether alone, in a group of single creates
// sharing a commit (Writer) or in a batch: check validates the request
// here, params spells it as a dbsqlc.LeadCreateParams, and lead_create_item_set
// (migration 00080) finds or creates its contact and inserts it, answering
// one lead_create_item_outcome per item, which answer turns into the lead or
// the API error. Single creates reach lead_create_item_set through
// lead_create_item_requests, which adds each request's Idempotency-Key and its
// own subtransaction: alone (createAlone) or in a group (createRequests,
// from the Writer). A batch's items reach it directly (createSet), in the
// batch's transaction under the batch's key.

// params is l as the create of one item: its new lead's id, and its new
// contact's id, which the lead takes when l's inline contact is not found.
func (l newLead) params(p *auth.Principal, path string) dbsqlc.LeadCreateParams {
	arg := dbsqlc.LeadCreateParams{
		WorkspaceID: p.WorkspaceID, ClientID: p.ClientID, Path: path, ID: opaqueid.New(), ContactID: l.contactID,
		Title: l.title, Status: l.status, Source: l.source, Campaign: l.campaign, Message: l.msg,
		ValueAmount: l.amount, ValueCurrency: l.currency, ExternalID: l.externalID,
		CustomFields: l.values, ContactCustomFields: l.contactValues,
	}
	if c := l.inline; c != nil {
		arg.ContactNewID = opaqueid.New()
		arg.ContactEmail, arg.ContactPhone, arg.ContactFirstName = c.Email, c.Phone, c.FirstName
		arg.ContactLastName, arg.ContactCompanyName, arg.ContactJobTitle = c.LastName, c.CompanyName, c.JobTitle
	}
	return arg
}

// request is a dbsqlc.LeadCreateParams as the type lead_create_request
// reads it from JSON: by name, a nil field left out (NULL: a batch's JSON
// is most of what PostgreSQL parses for it, so it carries no nulls),
// RequestHash as base64. It is converted from LeadCreateParams, so a field
// added to the query and not here does not compile.
type request struct {
	WorkspaceID        uuid.UUID  `json:"workspace_id"`
	ClientID           uuid.UUID  `json:"client_id"`
	Path               string     `json:"path"`
	Key                *string    `json:"key,omitempty"`
	RequestHash        []byte     `json:"request_hash,omitempty"`
	LockKey            *int64     `json:"lock_key,omitempty"`
	FreshSince         *time.Time `json:"fresh_since,omitempty"`
	ID                 uuid.UUID  `json:"id"`
	ContactID          *uuid.UUID `json:"contact_id,omitempty"`
	ContactNewID       uuid.UUID  `json:"contact_new_id"`
	ContactEmail       *string    `json:"contact_email,omitempty"`
	ContactPhone       *string    `json:"contact_phone,omitempty"`
	ContactFirstName   *string    `json:"contact_first_name,omitempty"`
	ContactLastName    *string    `json:"contact_last_name,omitempty"`
	ContactCompanyName *string    `json:"contact_company_name,omitempty"`
	ContactJobTitle    *string    `json:"contact_job_title,omitempty"`
	Title              *string    `json:"title,omitempty"`
	Status             string     `json:"status"`
	Source             *string    `json:"source,omitempty"`
	Campaign           *string    `json:"campaign,omitempty"`
	Message            *string    `json:"message,omitempty"`
	ValueAmount        *int64     `json:"value_amount,omitempty"`
	ValueCurrency      *string    `json:"value_currency,omitempty"`
	ExternalID         *string    `json:"external_id,omitempty"`
	// The values travel as JSON within the JSON (requestJSON), not base64.
	CustomFields        []byte `json:"-"`
	ContactCustomFields []byte `json:"-"`
}

// requestJSON is a request with its custom values as JSON objects.
type requestJSON struct {
	request
	CustomFields        json.RawMessage `json:"custom_fields,omitempty"`
	ContactCustomFields json.RawMessage `json:"contact_custom_fields,omitempty"`
}

// encode is items as the JSON array lead_create_request reads.
func encode(items []dbsqlc.LeadCreateParams) ([]byte, error) {
	out := make([]requestJSON, len(items))
	for i, a := range items {
		out[i] = requestJSON{request: request(a), CustomFields: a.CustomFields, ContactCustomFields: a.ContactCustomFields}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode lead creates: %w", err)
	}
	return b, nil
}

// createRequests runs single creates in one statement (LeadCreateRequests),
// their lock waits bounded together by budget when it is not nil (a
// group); one outcome per item, in order.
func createRequests(ctx context.Context, q db.DBTX, items []dbsqlc.LeadCreateParams, budget *time.Duration) ([]dbsqlc.LeadCreateItemOutcome, error) {
	js, err := encode(items)
	if err != nil {
		return nil, err
	}
	arg := dbsqlc.LeadCreateRequestsParams{Requests: js}
	if budget != nil {
		ms := int32(*budget / time.Millisecond)
		arg.LockBudgetMs = &ms
	}
	out, err := db.Q.LeadCreateRequests(ctx, q, arg)
	if err == nil && len(out) != len(items) {
		err = fmt.Errorf("lead_create_item_requests answered %d outcomes for %d creates", len(out), len(items))
	}
	return out, err
}

// createAlone runs one single create on its own statement (LeadCreate),
// under the role's lock_timeout: the lead, or the error [answer] gives.
func createAlone(ctx context.Context, q db.DBTX, arg dbsqlc.LeadCreateParams) (dbsqlc.Lead, error) {
	o, err := db.Q.LeadCreate(ctx, q, arg)
	if err != nil {
		return dbsqlc.Lead{}, err
	}
	return answer(o)
}

// createSet runs the items of a batch, all of workspace ws, on tx: one
// outcome per item, in order.
func createSet(ctx context.Context, tx db.DBTX, ws uuid.UUID, items []dbsqlc.LeadCreateParams) ([]dbsqlc.LeadCreateItemOutcome, error) {
	js, err := encode(items)
	if err != nil {
		return nil, err
	}
	out, err := db.Q.LeadCreateSet(ctx, tx, dbsqlc.LeadCreateSetParams{WorkspaceID: ws, Items: js})
	if err == nil && len(out) != len(items) {
		err = fmt.Errorf("lead_create_item_set answered %d outcomes for %d items", len(out), len(items))
	}
	return out, err
}

// SQLSTATEs an outcome can carry besides the idempotency refusals.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
	lockNotAvailable    = "55P03"
)

// answer is what an outcome says of its item (see lead_create_item_outcome):
// its lead; the 422 of a contactId that names no contact; the 409 naming
// the lead that holds its external id; [rounds.ErrConflictGone] when that
// lead let go of it meanwhile (run the create again); or the error that
// rolled back the request alone, as the db package reads it (an
// idempotency refusal, or ErrUnavailable for a lock it waited too long
// for).
func answer(o dbsqlc.LeadCreateItemOutcome) (dbsqlc.Lead, error) {
	switch {
	case o.ID != nil:
		return leadOf(o)
	case o.ErrCode == nil:
		return dbsqlc.Lead{}, noContact()
	case *o.ErrCode == uniqueViolation && o.ExistingID != nil:
		return dbsqlc.Lead{}, duplicate(*o.ExistingID)
	case *o.ErrCode == uniqueViolation, *o.ErrCode == foreignKeyViolation:
		// The holder let go of the external id, or the contact was
		// deleted after lead_create_item_set found it: run the create again.
		return dbsqlc.Lead{}, rounds.ErrConflictGone
	}
	constraint := ""
	if o.ErrConstraint != nil {
		constraint = *o.ErrConstraint
	}
	return dbsqlc.Lead{}, db.ItemError(*o.ErrCode, constraint)
}

// errIncompleteLead is an outcome with a lead whose NOT NULL columns are
// not all there: a lead_create_item_outcome that does not follow leads.
var errIncompleteLead = errors.New("lead_create_item_outcome: a lead without a NOT NULL column")

// leadOf is the lead of an outcome that has one.
func leadOf(o dbsqlc.LeadCreateItemOutcome) (dbsqlc.Lead, error) {
	if o.WorkspaceID == nil || o.ID == nil || o.ContactID == nil || o.Title == nil || o.Status == nil ||
		o.CreatedAt == nil || o.UpdatedAt == nil || o.ChangeXID == nil {
		return dbsqlc.Lead{}, errIncompleteLead
	}
	return dbsqlc.Lead{
		WorkspaceID: *o.WorkspaceID, ID: *o.ID, ContactID: *o.ContactID, Title: *o.Title, Status: *o.Status,
		Source: o.Source, Campaign: o.Campaign, Message: o.Message, ValueAmount: o.ValueAmount,
		ValueCurrency: o.ValueCurrency, ExternalID: o.ExternalID, CreatedAt: *o.CreatedAt, UpdatedAt: *o.UpdatedAt,
		ChangeXID: *o.ChangeXID, CustomFields: o.CustomFields,
	}, nil
}
