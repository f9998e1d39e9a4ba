package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/google/uuid"
	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	webhookv1 "github.com/svat/partnerapi/gen/partner/webhook/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/etag"
	"github.com/svat/partnerapi/internal/records/fieldmask"
	"github.com/svat/partnerapi/internal/records/idempotency"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/validate"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/eventtype"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/internal/webhook/signature"
	"github.com/svat/partnerapi/service/webhook/delivery"
)

// Path is the REST path of the endpoints.
const Path = "/api/v1/webhook-endpoints"

// MaxDescription is the longest description, in characters.
const MaxDescription = 500

// Endpoint statuses and the reason of a client's own disabling.
const (
	StatusEnabled  = "enabled"
	StatusDisabled = "disabled"
	ReasonManual   = "manual"
)

// lockedReasons are the disabled reasons a client cannot undo by
// enabling the endpoint: an administrator's decision, a revoked client's
// (disabled for good), and an administrator's ending of the client's
// credentials because they may have leaked (credentials_revoked: whoever
// held the secret may have made the endpoint, or changed its URL, so it
// must not come back by a PATCH that anyone with a token can send).
var lockedReasons = map[string]string{
	"admin":          "the endpoint was disabled by an administrator of the workspace; a client cannot enable it again: ask the administrator, who can enable it (the workspace settings page or partnerapi webhook enable), or create a new endpoint",
	"client_revoked": "the endpoint's API client was revoked",
	"credentials_revoked": "the endpoint was disabled when an administrator ended the API client's credentials (a secret that may have leaked); " +
		"a client cannot enable it again: check that it is yours, then create a new endpoint (a replay from an events cursor sends it what it missed)",
}

var updateRules = fieldmask.Rules{
	Writable: []string{"url", "event_types", "description", "status"},
	ReadOnly: map[string]string{
		"id": "is read-only", "disabled_reason": "is read-only", "secret": "is read-only; use rotate-secret",
		"created_at": "is read-only", "updated_at": "is read-only",
	},
}

// checkURL validates an endpoint URL as product.md's outbound rules say
// (the address every attempt dials is checked again after DNS) and
// returns it as it is stored and answered: with its host as IDNA
// A-labels (outbound.NormalizeURL). It refuses what every text field
// refuses, with the same violation (validate.TextProblem: controls,
// bidirectional and invisible characters, anywhere in the URL), so that
// no URL reads as something else in the answers, the page or a log.
func (s *Service) checkURL(v *validate.Errors, raw string) string {
	u := strings.TrimSpace(raw)
	if u == "" {
		v.Add("url", validate.Required, "is required: the https URL to deliver to")
		return u
	}
	if problem := validate.TextProblem(u, validate.SingleLine); problem != "" {
		v.Add("url", validate.InvalidFormat, problem)
		return u
	}
	n, err := outbound.NormalizeURL(u, s.Allowed)
	if err != nil {
		code := validate.InvalidFormat
		if errors.Is(err, outbound.ErrAddressNotAllowed) {
			code = "address_not_allowed"
		}
		v.Add("url", code, strings.TrimPrefix(err.Error(), "url "))
		return u
	}
	return n
}

// checkTypes validates event types: at least one, each known and readable
// under the token's scopes (which are within the client's), each once.
func checkTypes(v *validate.Errors, scopes scope.Set, types []string) []string {
	if len(types) == 0 {
		v.Add("eventTypes", validate.Required, "must name at least one event type: "+strings.Join(eventtype.Names(), ", "))
		return nil
	}
	out := make([]string, 0, len(types))
	for _, name := range types {
		t, ok := eventtype.Lookup(strings.TrimSpace(name))
		if !ok {
			v.Add("eventTypes", validate.InvalidValue, strconv.Quote(name)+" is not an event type; known: "+strings.Join(eventtype.Names(), ", "))
			continue
		}
		if !scopes.Has(t.Scope) {
			v.Add("eventTypes", "scope_missing", t.Name+" needs the scope "+t.ScopeName+", which the access token lacks")
			continue
		}
		if !slices.Contains(out, t.Name) {
			out = append(out, t.Name)
		}
	}
	return out
}

func checkDescription(v *validate.Errors, d *string) string {
	if t := v.Text("description", d, MaxDescription); t != nil {
		return *t
	}
	return ""
}

// CreateWebhookEndpoint registers an endpoint of the calling client. It
// starts at the feed's current end: it gets the events that become
// visible after it is created. The answer is the only one with the
// secret.
func (s *Service) CreateWebhookEndpoint(ctx context.Context, req *connect.Request[webhookv1.CreateWebhookEndpointRequest]) (*connect.Response[webhookv1.CreateWebhookEndpointResponse], error) {
	p := auth.FromContext(ctx)
	o := owner{p.WorkspaceID, p.ClientID}
	by := s.actorOf(ctx, req)
	in := req.Msg.GetEndpoint()
	if in == nil {
		in = &webhookv1.WebhookEndpoint{}
	}
	var v validate.Errors
	u := s.checkURL(&v, in.GetUrl())
	types := checkTypes(&v, p.Scopes, in.GetEventTypes())
	desc := checkDescription(&v, in.Description)
	if in.Status != nil && in.GetStatus() != StatusEnabled {
		v.Add("status", validate.InvalidValue, `must be "enabled" when creating an endpoint (disable it with a PATCH)`)
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	key, err := idempotency.NewKey(o.ws, o.client, Path, req.Header(), req.Msg)
	if err != nil {
		return nil, err
	}
	resp := &webhookv1.CreateWebhookEndpointResponse{}
	replayed, err := idempotency.InTx(ctx, s.DB, key, resp, func(tx db.DBTX) error {
		if err := db.Q.WebhookEndpointLockClient(ctx, tx, o.client); err != nil {
			return fmt.Errorf("lock client endpoints: %w", err)
		}
		n, err := db.Q.WebhookEndpointCount(ctx, tx, dbsqlc.WebhookEndpointCountParams{WorkspaceID: o.ws, ClientID: o.client})
		if err != nil {
			return fmt.Errorf("count webhook endpoints: %w", err)
		}
		if n >= MaxEndpoints {
			return apierror.New(apierror.CodeFailedPrecondition,
				"the API client has "+strconv.Itoa(MaxEndpoints)+" webhook endpoints, the most allowed; delete one, or subscribe an existing one to more event types")
		}
		xid, seq, err := delivery.Start(ctx, tx, o.ws)
		if err != nil {
			return fmt.Errorf("find feed start: %w", err)
		}
		id, secret := opaqueid.New(), signature.NewSecret()
		row, err := db.Q.WebhookEndpointCreate(ctx, tx, dbsqlc.WebhookEndpointCreateParams{
			WorkspaceID: o.ws, ID: id, ClientID: o.client, Url: u, EventTypes: types,
			Description: desc, Secret: secret, SecretSealed: s.Secrets.Seal(o.ws, id, secret), AfterXID: xid, AfterSeq: seq,
		})
		if err != nil {
			return fmt.Errorf("create webhook endpoint: %w", err)
		}
		resp.Endpoint = withSecret(row, secret)
		return audit(ctx, tx, o, by, ActionCreate, row.ID)
	})
	if err != nil {
		return nil, err
	}
	if replayed {
		if err := s.replayedSecret(ctx, o, resp.Endpoint); err != nil {
			return nil, err
		}
	}
	res := connect.NewResponse(resp)
	res.Header().Set("Location", Path+"/"+resp.Endpoint.GetId())
	if replayed {
		res.Header().Set(idempotency.ReplayedHeader, "true")
	} else {
		s.changed()
	}
	return res, nil
}

// ListWebhookEndpoints lists the calling client's endpoints, oldest
// first. A client has at most MaxEndpoints, so there is one page.
func (s *Service) ListWebhookEndpoints(ctx context.Context, _ *connect.Request[webhookv1.ListWebhookEndpointsRequest]) (*connect.Response[webhookv1.ListWebhookEndpointsResponse], error) {
	p := auth.FromContext(ctx)
	rows, err := db.Q.WebhookEndpointList(ctx, s.DB.Conn(), dbsqlc.WebhookEndpointListParams{WorkspaceID: p.WorkspaceID, ClientID: p.ClientID})
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	out := &webhookv1.ListWebhookEndpointsResponse{WebhookEndpoints: make([]*webhookv1.WebhookEndpoint, 0, len(rows))}
	for _, r := range rows {
		out.WebhookEndpoints = append(out.WebhookEndpoints, toProto(r))
	}
	return connect.NewResponse(out), nil
}

// GetWebhookEndpoint returns one of the client's endpoints, never its
// secret.
func (s *Service) GetWebhookEndpoint(ctx context.Context, req *connect.Request[webhookv1.GetWebhookEndpointRequest]) (*connect.Response[webhookv1.GetWebhookEndpointResponse], error) {
	p := auth.FromContext(ctx)
	id, err := endpointID(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	row, err := get(ctx, s.DB.Conn(), owner{p.WorkspaceID, p.ClientID}, id, false)
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(&webhookv1.GetWebhookEndpointResponse{Endpoint: toProto(row)})
	res.Header().Set(etag.Header, ETag(row))
	return res, nil
}

// UpdateWebhookEndpoint applies the members of update_mask (over REST, of
// the merge patch) to an endpoint, under a row lock. status "disabled"
// disables it (disabledReason manual); "enabled" on a disabled endpoint
// enables it and, in the same transaction, makes its deliveries not yet
// made with success due again (delivery.Resume), so it resumes from its
// oldest one. An update that changes nothing writes nothing.
func (s *Service) UpdateWebhookEndpoint(ctx context.Context, req *connect.Request[webhookv1.UpdateWebhookEndpointRequest]) (*connect.Response[webhookv1.UpdateWebhookEndpointResponse], error) {
	p := auth.FromContext(ctx)
	o := owner{p.WorkspaceID, p.ClientID}
	by := s.actorOf(ctx, req)
	in := req.Msg.GetEndpoint()
	if in == nil {
		in = &webhookv1.WebhookEndpoint{}
	}
	paths, err := fieldmask.Paths(req.Msg.GetUpdateMask(), in, updateRules)
	if err != nil {
		return nil, err
	}
	id, err := endpointID(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	var v validate.Errors
	var next dbsqlc.WebhookEndpointUpdateParams
	if paths["url"] {
		next.Url = s.checkURL(&v, in.GetUrl())
	}
	if paths["event_types"] {
		next.EventTypes = checkTypes(&v, p.Scopes, in.GetEventTypes())
	}
	if paths["description"] {
		next.Description = checkDescription(&v, in.Description)
	}
	if paths["status"] && in.GetStatus() != StatusEnabled && in.GetStatus() != StatusDisabled {
		v.Add("status", validate.InvalidValue, `must be "enabled" or "disabled"`)
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	ifMatch := req.Header().Values(etag.IfMatch)
	var row dbsqlc.WebhookEndpoint
	var wrote bool
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		cur, err := get(ctx, tx, o, id, true)
		if err != nil {
			return err
		}
		if err := etag.Check(ifMatch, ETag(cur)); err != nil {
			return err
		}
		row = cur
		arg := dbsqlc.WebhookEndpointUpdateParams{
			WorkspaceID: o.ws, ClientID: o.client, ID: id, Url: cur.Url, EventTypes: cur.EventTypes,
			Description: cur.Description, Status: cur.Status, DisabledReason: cur.DisabledReason,
		}
		if paths["url"] {
			arg.Url = next.Url
		}
		if paths["event_types"] {
			arg.EventTypes = next.EventTypes
		}
		if paths["description"] {
			arg.Description = next.Description
		}
		resume := false
		if paths["status"] && in.GetStatus() != cur.Status {
			switch in.GetStatus() {
			case StatusDisabled:
				reason := ReasonManual
				arg.Status, arg.DisabledReason = StatusDisabled, &reason
			case StatusEnabled:
				if why, locked := lockedReasons[deref(cur.DisabledReason)]; locked {
					return apierror.New(apierror.CodeFailedPrecondition, why)
				}
				arg.Status, arg.DisabledReason, resume = StatusEnabled, nil, true
			}
		}
		if arg.Url == cur.Url && slices.Equal(arg.EventTypes, cur.EventTypes) && arg.Description == cur.Description &&
			arg.Status == cur.Status {
			return nil
		}
		if row, err = db.Q.WebhookEndpointUpdate(ctx, tx, arg); err != nil {
			return fmt.Errorf("update webhook endpoint: %w", err)
		}
		if resume {
			if err := delivery.Resume(ctx, tx, o.ws, id); err != nil {
				return fmt.Errorf("resume webhook endpoint: %w", err)
			}
		}
		wrote = true
		return audit(ctx, tx, o, by, ActionUpdate, id)
	})
	if err != nil {
		return nil, err
	}
	if wrote {
		s.changed()
	}
	res := connect.NewResponse(&webhookv1.UpdateWebhookEndpointResponse{Endpoint: toProto(row)})
	res.Header().Set(etag.Header, ETag(row))
	return res, nil
}

// DeleteWebhookEndpoint deletes one of the client's endpoints with its
// deliveries and their log (If-Match honoured), and the stored
// idempotent answers that hold its secrets.
func (s *Service) DeleteWebhookEndpoint(ctx context.Context, req *connect.Request[webhookv1.DeleteWebhookEndpointRequest]) (*connect.Response[webhookv1.DeleteWebhookEndpointResponse], error) {
	p := auth.FromContext(ctx)
	o := owner{p.WorkspaceID, p.ClientID}
	by := s.actorOf(ctx, req)
	id, err := endpointID(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	ifMatch := req.Header().Values(etag.IfMatch)
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		cur, err := get(ctx, tx, o, id, true)
		if err != nil {
			return err
		}
		if err := etag.Check(ifMatch, ETag(cur)); err != nil {
			return err
		}
		if _, err := db.Q.WebhookEndpointDelete(ctx, tx, dbsqlc.WebhookEndpointDeleteParams{WorkspaceID: o.ws, ClientID: o.client, ID: id}); err != nil {
			return fmt.Errorf("delete webhook endpoint: %w", err)
		}
		// The stored answers of its create and rotations hold its secrets.
		if err := idempotency.Erase(ctx, tx, o.ws, []uuid.UUID{id}, []string{opaqueid.Format(opaqueid.Webhook, id)}); err != nil {
			return err
		}
		return audit(ctx, tx, o, by, ActionDelete, id)
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&webhookv1.DeleteWebhookEndpointResponse{}), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
