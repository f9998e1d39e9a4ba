// Package webhook serves the webhook endpoint management API
// (/api/v1/webhook-endpoints, product.md "Events and webhooks"): the
// endpoints of the calling API client, their secrets, a test delivery, a
// replay from an events cursor and the delivery log. Every query is scoped
// by workspace and client, so another client's endpoint is a 404 like an
// unknown one. Deliveries themselves are the engine's
// (service/webhook/delivery); this package moves an endpoint's place in
// the feed only through the engine's Start, Replay and Resume.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	webhookv1 "github.com/svat/partnerapi/gen/partner/webhook/v1"
	"github.com/svat/partnerapi/gen/partner/webhook/v1/webhookv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/records/etag"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/service/event"
	"github.com/svat/partnerapi/service/webhook/secrets"
)

// MaxEndpoints is how many endpoints one API client may have. A receiver
// takes any number of event types, so more are rarely needed, and the cap
// bounds the fan-out work one client can cause.
const MaxEndpoints = 16

// Audit actions of endpoint changes (reads are not audited).
const (
	ActionCreate = "webhook_endpoint.create"
	ActionUpdate = "webhook_endpoint.update"
	ActionDelete = "webhook_endpoint.delete"
	ActionRotate = "webhook_endpoint.rotate_secret"
	ActionReplay = "webhook_endpoint.replay"
)

// Tester sends one webhook.test delivery to an endpoint now and reports
// what the receiver answered (the delivery engine implements it).
type Tester interface {
	Test(ctx context.Context, workspace, endpoint uuid.UUID) (outbound.Result, error)
}

// Service implements WebhookService.
type Service struct {
	DB      *db.DB
	Cursors listing.Cursors
	// Events reads the events cursors a replay starts from.
	Events *event.Service
	// Allowed are the networks an operator trusts
	// (PARTNER_WEBHOOK_ALLOWED_NETWORKS): endpoint URLs may point into
	// them, over http too.
	Allowed outbound.Networks
	// Tester sends test deliveries; nil answers them Unavailable.
	Tester Tester
	// OnChange is called after a change that gives the delivery workers
	// work (a create, an update, a replay) commits; nil: nothing.
	OnChange func()
	// Now is the clock of secret rotation (time.Now when nil).
	Now func() time.Time
	// Sources finds a request's source address (the trusted proxies of
	// PARTNER_TRUSTED_PROXIES), which the audit log records of every
	// endpoint change.
	Sources ratelimit.Sources
	// Secrets seals the endpoints' secrets at rest (PARTNER_SECRET_KEY).
	Secrets secrets.Box
}

var _ webhookv1connect.WebhookServiceHandler = (*Service)(nil)

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) changed() {
	if s.OnChange != nil {
		s.OnChange()
	}
}

func notFound() error {
	return apierror.New(apierror.CodeNotFound, "no webhook endpoint with this id for this API client")
}

// endpointID parses an endpoint's opaque id; a malformed one is the same
// 404 as an unknown one, so existence never leaks.
func endpointID(s string) (uuid.UUID, error) {
	id, ok := opaqueid.Parse(opaqueid.Webhook, s)
	if !ok {
		return uuid.UUID{}, notFound()
	}
	return id, nil
}

// owner names whose endpoint a query reads: the calling client's.
type owner struct{ ws, client uuid.UUID }

// get reads one of the owner's endpoints on q, locking it when lock.
func get(ctx context.Context, q db.DBTX, o owner, id uuid.UUID, lock bool) (dbsqlc.WebhookEndpoint, error) {
	var row dbsqlc.WebhookEndpoint
	var err error
	if lock {
		row, err = db.Q.WebhookEndpointGetForUpdate(ctx, q, dbsqlc.WebhookEndpointGetForUpdateParams{WorkspaceID: o.ws, ClientID: o.client, ID: id})
	} else {
		row, err = db.Q.WebhookEndpointGet(ctx, q, dbsqlc.WebhookEndpointGetParams{WorkspaceID: o.ws, ClientID: o.client, ID: id})
	}
	if errors.Is(err, db.ErrNotFound) {
		return row, notFound()
	}
	if err != nil {
		return row, fmt.Errorf("get webhook endpoint: %w", err)
	}
	return row, nil
}

// actor is who made an endpoint change, besides its client, as the audit
// log records it: the token (the first 16 hex digits of its SHA-256, never
// the token) and the request's source address. With a leaked client
// secret, these tell the endpoints its thief made from the owner's.
type actor struct {
	token  *string
	source *netip.Addr
}

// request is what actorOf reads of an RPC's request.
type request interface {
	Peer() connect.Peer
	Header() http.Header
}

// actorOf is the actor of a request: its principal's token, and its
// source as the rate limits find it (Sources: the peer, or past the
// trusted proxies the X-Forwarded-For hop nearest to us), the whole
// address. Over REST the handler's request has no peer (the gateway
// calls it in process, with the HTTP request's headers): the request's
// Info has it.
func (s *Service) actorOf(ctx context.Context, req request) actor {
	var a actor
	if p := auth.FromContext(ctx); p != nil {
		if t := p.TokenHashPrefix(); t != "" {
			a.token = &t
		}
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

// audit records a change of endpoint by the client in the change's
// transaction. The actor is the API client (client_id) with the token it
// used and the request's source address, not a member; the endpoint is
// the target.
func audit(ctx context.Context, q db.DBTX, o owner, by actor, action string, endpoint uuid.UUID) error {
	client := o.client
	target := opaqueid.Format(opaqueid.Webhook, endpoint)
	if err := db.Q.AuditEventCreate(ctx, q, dbsqlc.AuditEventCreateParams{WorkspaceID: o.ws, Action: action, ClientID: &client, TargetID: &target,
		TokenHashPrefix: by.token, SourceAddress: by.source}); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// toProto renders an endpoint without its secret. Its URL is shown as
// outbound.DisplayURL shows it: the same as stored, but for one stored
// before hosts were kept as A-labels.
func toProto(r dbsqlc.WebhookEndpoint) *webhookv1.WebhookEndpoint {
	e := &webhookv1.WebhookEndpoint{
		Id: opaqueid.Format(opaqueid.Webhook, r.ID), Url: outbound.DisplayURL(r.Url), EventTypes: r.EventTypes,
		Status: &r.Status, DisabledReason: r.DisabledReason,
		CreatedAt: timestamppb.New(r.CreatedAt.UTC()), UpdatedAt: timestamppb.New(r.UpdatedAt.UTC()),
	}
	if r.Description != "" {
		d := r.Description
		e.Description = &d
	}
	return e
}

// withSecret renders an endpoint with its secret: the answers of a
// create and a rotation, the only ones that show it.
func withSecret(r dbsqlc.WebhookEndpoint, secret string) *webhookv1.WebhookEndpoint {
	e := toProto(r)
	e.Secret = &secret
	return e
}

// replayedSecret puts back the secret of a replayed create or rotation.
// The stored answer keeps only its digest (idempotency_redact_secrets);
// the endpoint's secret now is answered when it is the one the first
// request answered, and a secret since rotated away (or an endpoint since
// deleted) is refused: a replay never hands out a retired secret.
func (s *Service) replayedSecret(ctx context.Context, o owner, e *webhookv1.WebhookEndpoint) error {
	retired := apierror.New(apierror.CodeSecretRetired,
		"this Idempotency-Key's request was carried out, but the secret it answered has been rotated since (or the endpoint deleted) and is not shown again; rotate the endpoint's secret to get a new one")
	id, ok := opaqueid.Parse(opaqueid.Webhook, e.GetId())
	if !ok {
		return retired
	}
	// The endpoint the request made or rotated, so that the caller can
	// rotate it (existingId, as a duplicate names what it collides with).
	retired.ExistingID = e.GetId()
	row, err := db.Q.WebhookEndpointGet(ctx, s.DB.Conn(), dbsqlc.WebhookEndpointGetParams{WorkspaceID: o.ws, ClientID: o.client, ID: id})
	if errors.Is(err, db.ErrNotFound) {
		return retired
	}
	if err != nil {
		return fmt.Errorf("get webhook endpoint: %w", err)
	}
	cur, err := s.Secrets.Open(row.WorkspaceID, row.ID, row.SecretSealed, &row.Secret)
	if err != nil {
		return fmt.Errorf("read webhook secret: %w", err)
	}
	if !secrets.Matches(e.GetSecret(), cur) {
		return retired
	}
	e.Secret = &cur
	return nil
}

// ETag is the entity tag of an endpoint's current version: every change
// sets its updated_at.
func ETag(r dbsqlc.WebhookEndpoint) string { return etag.Of(r.ID, 0, r.UpdatedAt) }
