// Package customfield serves the custom field definitions API
// (/api/v1/custom-fields, CustomFieldService; product.md "Custom
// fields"): a workspace's typed fields of its own on contacts and leads.
// The rules live here, above the queries, and the admin API's operator
// commands (partnerapi field) run the same functions. Reads need apps:read
// or the object's read or write scope and answer only the objects the
// token may see; changes need fields:write and are audited with the API
// client, its token and the request's source address. Deleting a
// definition hides its values at once; [Erase], run by the server's
// background work, removes them from storage and then the definition.
//
// The values on records are not this package's: internal/records/customfield
// is what their checks and answers read.
package customfield

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	customfieldv1 "github.com/svat/partnerapi/gen/partner/customfield/v1"
	"github.com/svat/partnerapi/gen/partner/customfield/v1/customfieldv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/etag"
	"github.com/svat/partnerapi/internal/records/idempotency"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/internal/security/scope"
)

// Path is the REST path of the definitions.
const Path = "/api/v1/custom-fields"

// Audit actions of definition changes (reads are not audited).
const (
	ActionCreate = "custom_field.create"
	ActionUpdate = "custom_field.update"
	ActionDelete = "custom_field.delete"
)

// Service implements CustomFieldService.
type Service struct {
	DB *db.DB
	// Sources finds a request's source address (PARTNER_TRUSTED_PROXIES),
	// which the audit log records of every change.
	Sources ratelimit.Sources
}

var _ customfieldv1connect.CustomFieldServiceHandler = (*Service)(nil)

// readers are the scopes that show an object's definitions: apps:read
// (the app-adjacent data apps build on) or the object's own.
var readers = map[customfield.Object]scope.Set{
	customfield.Contact: scope.AppsRead | scope.ContactsRead | scope.ContactsWrite,
	customfield.Lead:    scope.AppsRead | scope.LeadsRead | scope.LeadsWrite,
}

// visible reports whether a token of scopes may read object's
// definitions.
func visible(scopes scope.Set, object customfield.Object) bool { return scopes&readers[object] != 0 }

// refuseObject is the 403 of a read of an object the token may not see,
// naming the scopes that would show it.
func refuseObject(ctx context.Context, object customfield.Object) error {
	return auth.InsufficientScope(ctx, strings.Join(readers[object].Names(), " "))
}

// actor is who made a change, besides the API client: the token (the
// first 16 hex digits of its SHA-256) and the request's source address.
type actor struct {
	ws, client uuid.UUID
	token      *string
	source     *netip.Addr
}

type request interface {
	Peer() connect.Peer
	Header() http.Header
}

// actorOf is the actor of a request, as service/webhook finds it: over
// REST the handler's request has no peer, the request's Info has it.
func (s *Service) actorOf(ctx context.Context, req request) actor {
	p := auth.FromContext(ctx)
	a := actor{ws: p.WorkspaceID, client: p.ClientID}
	if t := p.TokenHashPrefix(); t != "" {
		a.token = &t
	}
	peer := req.Peer().Addr
	if peer == "" {
		peer = requestid.InfoFrom(ctx).Peer
	}
	if src, ok := s.Sources.Addr(peer, req.Header()); ok {
		a.source = &src
	}
	return a
}

// audit records a change by the client in the change's transaction, the
// field as its target.
func (a actor) audit(ctx context.Context, tx db.DBTX, action string, id uuid.UUID) error {
	target := opaqueid.Format(opaqueid.Field, id)
	client := a.client
	if err := db.Q.AuditEventCreate(ctx, tx, dbsqlc.AuditEventCreateParams{WorkspaceID: a.ws, Action: action, ClientID: &client,
		TargetID: &target, TokenHashPrefix: a.token, SourceAddress: a.source}); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// ETag is the entity tag of a definition's current version: every change
// sets its updated_at.
func ETag(r dbsqlc.CustomField) string { return etag.Of(r.ID, 0, r.UpdatedAt) }

// ListCustomFields lists the definitions of the objects the token may
// see (of object, when asked), oldest first.
func (s *Service) ListCustomFields(ctx context.Context, req *connect.Request[customfieldv1.ListCustomFieldsRequest]) (*connect.Response[customfieldv1.ListCustomFieldsResponse], error) {
	p := auth.FromContext(ctx)
	var objects []customfield.Object
	if req.Msg.Object != nil {
		o, ok := ParseObject(req.Msg.GetObject())
		if !ok {
			e := apierror.Malformed(`object must be "contact" or "lead"`)
			e.Fields = []apierror.FieldViolation{{Field: "object", Code: "invalid_value", Message: `must be "contact" or "lead"`}}
			return nil, e
		}
		if !visible(p.Scopes, o) {
			return nil, refuseObject(ctx, o)
		}
		objects = []customfield.Object{o}
	} else {
		for _, o := range Objects {
			if visible(p.Scopes, o) {
				objects = append(objects, o)
			}
		}
	}
	rows, err := List(ctx, s.DB.Conn(), p.WorkspaceID, objects)
	if err != nil {
		return nil, err
	}
	out := &customfieldv1.ListCustomFieldsResponse{CustomFields: make([]*customfieldv1.CustomField, 0, len(rows))}
	for _, r := range rows {
		f, err := ToProto(r)
		if err != nil {
			return nil, err
		}
		out.CustomFields = append(out.CustomFields, f)
	}
	return connect.NewResponse(out), nil
}

// GetCustomField returns one definition, if the token may see its
// object.
func (s *Service) GetCustomField(ctx context.Context, req *connect.Request[customfieldv1.GetCustomFieldRequest]) (*connect.Response[customfieldv1.GetCustomFieldResponse], error) {
	p := auth.FromContext(ctx)
	id, err := ParseID(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	row, err := Get(ctx, s.DB.Conn(), p.WorkspaceID, id, false)
	if err != nil {
		return nil, err
	}
	if o := customfield.Object(row.Object); !visible(p.Scopes, o) {
		return nil, refuseObject(ctx, o)
	}
	f, err := ToProto(row)
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(&customfieldv1.GetCustomFieldResponse{CustomField: f})
	res.Header().Set(etag.Header, ETag(row))
	return res, nil
}

// CreateCustomField defines a field (Idempotency-Key honoured).
func (s *Service) CreateCustomField(ctx context.Context, req *connect.Request[customfieldv1.CreateCustomFieldRequest]) (*connect.Response[customfieldv1.CreateCustomFieldResponse], error) {
	by := s.actorOf(ctx, req)
	in, err := CheckCreate(req.Msg.GetCustomField())
	if err != nil {
		return nil, err
	}
	key, err := idempotency.NewKey(by.ws, by.client, Path, req.Header(), req.Msg)
	if err != nil {
		return nil, err
	}
	resp := &customfieldv1.CreateCustomFieldResponse{}
	replayed, err := idempotency.InTx(ctx, s.DB, key, resp, func(tx db.DBTX) error {
		row, err := Create(ctx, tx, by.ws, in)
		if err != nil {
			return err
		}
		if resp.CustomField, err = ToProto(row); err != nil {
			return err
		}
		return by.audit(ctx, tx, ActionCreate, row.ID)
	})
	customfield.Forget(by.ws) // after the commit: see Forget
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(resp)
	res.Header().Set("Location", Path+"/"+resp.CustomField.GetId())
	if replayed {
		res.Header().Set(idempotency.ReplayedHeader, "true")
	}
	return res, nil
}

// UpdateCustomField applies the members of update_mask (over REST, of
// the merge patch) under a row lock, If-Match honoured. An update that
// changes nothing writes nothing and is not audited.
func (s *Service) UpdateCustomField(ctx context.Context, req *connect.Request[customfieldv1.UpdateCustomFieldRequest]) (*connect.Response[customfieldv1.UpdateCustomFieldResponse], error) {
	by := s.actorOf(ctx, req)
	patch, err := CheckUpdate(req.Msg)
	if err != nil {
		return nil, err
	}
	id, err := ParseID(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	ifMatch := req.Header().Values(etag.IfMatch)
	var row dbsqlc.CustomField
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		cur, err := Get(ctx, tx, by.ws, id, true)
		if err != nil {
			return err
		}
		if err := etag.Check(ifMatch, ETag(cur)); err != nil {
			return err
		}
		var wrote bool
		if row, wrote, err = Update(ctx, tx, cur, patch); err != nil || !wrote {
			return err
		}
		return by.audit(ctx, tx, ActionUpdate, id)
	})
	customfield.Forget(by.ws) // after the commit: see Forget
	if err != nil {
		return nil, err
	}
	f, err := ToProto(row)
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(&customfieldv1.UpdateCustomFieldResponse{CustomField: f})
	res.Header().Set(etag.Header, ETag(row))
	return res, nil
}

// DeleteCustomField deletes a definition (If-Match honoured): its values
// leave every answer at once; Erase removes them from storage later.
func (s *Service) DeleteCustomField(ctx context.Context, req *connect.Request[customfieldv1.DeleteCustomFieldRequest]) (*connect.Response[customfieldv1.DeleteCustomFieldResponse], error) {
	by := s.actorOf(ctx, req)
	id, err := ParseID(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	ifMatch := req.Header().Values(etag.IfMatch)
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		cur, err := Get(ctx, tx, by.ws, id, true)
		if err != nil {
			return err
		}
		if err := etag.Check(ifMatch, ETag(cur)); err != nil {
			return err
		}
		if err := Delete(ctx, tx, by.ws, id); err != nil {
			return err
		}
		return by.audit(ctx, tx, ActionDelete, id)
	})
	customfield.Forget(by.ws) // after the commit: see Forget
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&customfieldv1.DeleteCustomFieldResponse{}), nil
}
