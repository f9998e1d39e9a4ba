package webhook

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	webhookv1 "github.com/svat/partnerapi/gen/partner/webhook/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/idempotency"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/validate"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/webhook/signature"
	"github.com/svat/partnerapi/service/webhook/delivery"
)

// Bounds of expireCurrentInSeconds: how long the current secret keeps
// signing after a rotation.
const (
	DefaultOverlap = 24 * time.Hour
	MaxOverlap     = 7 * 24 * time.Hour
)

// RotateWebhookEndpointSecret gives an endpoint a new secret. The current
// one becomes the previous secret, which keeps signing (deliveries carry
// both signatures) until expireCurrentInSeconds have passed; 0 retires it
// at once. The answer is the only one with the new secret (and is what an
// Idempotency-Key replays).
func (s *Service) RotateWebhookEndpointSecret(ctx context.Context, req *connect.Request[webhookv1.RotateWebhookEndpointSecretRequest]) (*connect.Response[webhookv1.RotateWebhookEndpointSecretResponse], error) {
	p := auth.FromContext(ctx)
	o := owner{p.WorkspaceID, p.ClientID}
	by := s.actorOf(ctx, req)
	overlap := DefaultOverlap
	if req.Msg.ExpireCurrentInSeconds != nil {
		secs := req.Msg.GetExpireCurrentInSeconds()
		if secs < 0 || time.Duration(secs)*time.Second > MaxOverlap {
			var v validate.Errors
			v.Add("expireCurrentInSeconds", validate.InvalidValue, "must be from 0 to "+strconv.Itoa(int(MaxOverlap/time.Second))+" seconds")
			return nil, v.Err()
		}
		overlap = time.Duration(secs) * time.Second
	}
	id, err := endpointID(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	secret := signature.NewSecret()
	arg := dbsqlc.WebhookEndpointRotateSecretParams{WorkspaceID: o.ws, ClientID: o.client, ID: id, Secret: secret,
		SecretSealed: s.Secrets.Seal(o.ws, id, secret)}
	if overlap > 0 {
		until := s.now().Add(overlap).UTC()
		arg.PreviousExpiresAt = &until
	}
	key, err := idempotency.NewKey(o.ws, o.client, Path+"/"+req.Msg.GetId()+"/rotate-secret", req.Header(), req.Msg)
	if err != nil {
		return nil, err
	}
	resp := &webhookv1.RotateWebhookEndpointSecretResponse{}
	replayed, err := idempotency.InTx(ctx, s.DB, key, resp, func(tx db.DBTX) error {
		row, err := db.Q.WebhookEndpointRotateSecret(ctx, tx, arg)
		if errors.Is(err, db.ErrNotFound) {
			return notFound()
		}
		if err != nil {
			return fmt.Errorf("rotate webhook secret: %w", err)
		}
		resp.Endpoint = withSecret(row, secret)
		return audit(ctx, tx, o, by, ActionRotate, row.ID)
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
	if replayed {
		res.Header().Set(idempotency.ReplayedHeader, "true")
	}
	return res, nil
}

// TestWebhookEndpoint sends one webhook.test delivery now and answers its
// result, whatever the receiver answered: the receiver's status, how long
// the attempt took, and why it failed when no answer came. It changes
// nothing, so an Idempotency-Key is not needed: a retry sends another
// test.
func (s *Service) TestWebhookEndpoint(ctx context.Context, req *connect.Request[webhookv1.TestWebhookEndpointRequest]) (*connect.Response[webhookv1.TestWebhookEndpointResponse], error) {
	p := auth.FromContext(ctx)
	id, err := endpointID(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	if _, err := get(ctx, s.DB.Conn(), owner{p.WorkspaceID, p.ClientID}, id, false); err != nil {
		return nil, err
	}
	if s.Tester == nil {
		return nil, apierror.New(apierror.CodeUnavailable, "test deliveries are not available on this server")
	}
	// The attempt is bounded by the delivery timeout, as every delivery
	// is, not by the request's database budget (4 s): a receiver that
	// never answers is reported as "timeout" when a delivery would be.
	// A caller that goes away still cancels it.
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})
	defer stop()
	r, err := s.Tester.Test(tctx, p.WorkspaceID, id)
	if err != nil {
		return nil, fmt.Errorf("test webhook endpoint: %w", err)
	}
	out := &webhookv1.TestWebhookEndpointResponse{DurationMs: int32(min(r.Duration.Milliseconds(), 1<<31-1))}
	if r.ResponseStatus != 0 {
		st := int32(r.ResponseStatus)
		out.ResponseStatus = &st
	}
	if r.Error != "" {
		e := r.Error
		out.Error = &e
	}
	return connect.NewResponse(out), nil
}

// ReplayWebhookEndpoint makes every event after fromCursor (an events
// cursor of the workspace) that the endpoint subscribes to due again, up
// to the endpoint's place in the feed; later events follow as usual.
func (s *Service) ReplayWebhookEndpoint(ctx context.Context, req *connect.Request[webhookv1.ReplayWebhookEndpointRequest]) (*connect.Response[webhookv1.ReplayWebhookEndpointResponse], error) {
	p := auth.FromContext(ctx)
	o := owner{p.WorkspaceID, p.ClientID}
	by := s.actorOf(ctx, req)
	id, err := endpointID(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetFromCursor() == "" {
		return nil, listing.Invalid("fromCursor", "is required: an event's cursor, or a cursor of a page of GET /api/v1/events")
	}
	xid, seq, err := s.Events.Position(o.ws, "fromCursor", req.Msg.GetFromCursor())
	if err != nil {
		return nil, err
	}
	key, err := idempotency.NewKey(o.ws, o.client, Path+"/"+req.Msg.GetId()+"/replay", req.Header(), req.Msg)
	if err != nil {
		return nil, err
	}
	resp := &webhookv1.ReplayWebhookEndpointResponse{}
	replayed, err := idempotency.InTx(ctx, s.DB, key, resp, func(tx db.DBTX) error {
		if _, err := get(ctx, tx, o, id, true); err != nil {
			return err
		}
		if err := s.Events.InHistory(ctx, tx, o.ws, "fromCursor", req.Msg.GetFromCursor()); err != nil {
			return err
		}
		if _, err := delivery.Replay(ctx, tx, o.ws, id, xid, seq); err != nil {
			return fmt.Errorf("replay webhook endpoint: %w", err)
		}
		return audit(ctx, tx, o, by, ActionReplay, id)
	})
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(resp)
	if replayed {
		res.Header().Set(idempotency.ReplayedHeader, "true")
	} else {
		s.changed()
	}
	return res, nil
}

// ListWebhookDeliveries lists an endpoint's delivery attempts, newest
// first, in keyset pages by attempt id.
func (s *Service) ListWebhookDeliveries(ctx context.Context, req *connect.Request[webhookv1.ListWebhookDeliveriesRequest]) (*connect.Response[webhookv1.ListWebhookDeliveriesResponse], error) {
	p := auth.FromContext(ctx)
	o := owner{p.WorkspaceID, p.ClientID}
	m := req.Msg
	id, err := endpointID(m.GetId())
	if err != nil {
		return nil, err
	}
	limit := int32(listing.DefaultLimit)
	if m.Limit != nil {
		if *m.Limit < 1 || *m.Limit > listing.MaxLimit {
			return nil, listing.Invalid("limit", "must be an integer from 1 to 100")
		}
		limit = *m.Limit
	}
	b := deliveriesBinding(o, id)
	var before *int64
	if m.GetCursor() != "" {
		pos, err := s.Cursors.Decode(b, m.GetCursor())
		if err != nil {
			return nil, listing.Invalid("cursor", "is not a cursor of this endpoint's deliveries; pass pagination.nextCursor of the previous page")
		}
		before = &pos.Key
	}
	if _, err := get(ctx, s.DB.Conn(), o, id, false); err != nil {
		return nil, err
	}
	rows, err := db.Q.WebhookAttemptList(ctx, s.DB.Conn(), dbsqlc.WebhookAttemptListParams{
		WorkspaceID: o.ws, EndpointID: id, BeforeID: before, MaxRows: limit + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	out := &webhookv1.ListWebhookDeliveriesResponse{
		Deliveries: make([]*webhookv1.WebhookDelivery, 0, min(len(rows), int(limit))), Pagination: &webhookv1.Pagination{},
	}
	if len(rows) > int(limit) {
		rows = rows[:limit]
		c := s.Cursors.Encode(b, listing.Position{Key: rows[len(rows)-1].ID})
		out.Pagination.NextCursor = &c
	}
	for _, r := range rows {
		out.Deliveries = append(out.Deliveries, &webhookv1.WebhookDelivery{
			EventId: opaqueid.Format(opaqueid.Event, r.EventID), EventType: r.EventType, Attempt: r.Attempt,
			Status: r.Status, ResponseStatus: r.ResponseStatus, DurationMs: r.DurationMs, Error: r.Error,
			At: timestamppb.New(r.At.UTC()),
		})
	}
	return connect.NewResponse(out), nil
}

// deliveriesBinding binds a deliveries cursor to the endpoint and its
// client.
func deliveriesBinding(o owner, endpoint uuid.UUID) listing.Binding {
	return listing.Binding{Workspace: o.ws, Resource: "webhook_deliveries", Filters: o.client.String() + "/" + endpoint.String(), Key: "id"}
}
