package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/webhook/delivery"
)

// ActionWebhookEnable is an administrator's enabling of an endpoint again
// (EnableWebhookEndpoint, `partnerapi webhook enable`, the settings page's
// "Enable"); the event names the endpoint's client and the endpoint.
const ActionWebhookEnable = "webhook_endpoint.enable"

// enableReasons are the disabled reasons an administrator may undo
// (docs/webhooks.md, "Disabling and enabling an endpoint"): their own
// decision ("admin"), the one taken with the client's credentials
// ("credentials_revoked": the administrator has checked the endpoint is
// the client's), and the delivery engine's ("failing", "gone", "backlog":
// the receiver is fixed). The endpoint resumes from the feed, as a
// client's enable does. Not here: "client_revoked" (a revoked client's
// endpoints stay disabled for good, product.md) and "manual" (the client
// disabled it itself, and enables it itself).
var enableReasons = map[string]bool{
	"admin": true, "credentials_revoked": true, "failing": true, "gone": true, "backlog": true,
}

// CanEnableWebhook reports whether an administrator may enable again an
// endpoint disabled for reason (the settings page shows "Enable" then).
func CanEnableWebhook(reason string) bool { return enableReasons[reason] }

// notEnabled says why an endpoint disabled for reason cannot be enabled
// by an administrator.
var notEnabled = map[string]string{
	"client_revoked": "the endpoint's API client was revoked: its webhook endpoints stay disabled for good",
	"manual":         "the endpoint's API client disabled it itself: only the client can enable it again (PATCH status enabled)",
}

// EnableWebhookEndpoint enables again an endpoint of a client of the
// acting member's workspace. An endpoint of another workspace is not
// found.
func (s *Service) EnableWebhookEndpoint(ctx context.Context, req *connect.Request[adminv1.EnableWebhookEndpointRequest]) (*connect.Response[adminv1.EnableWebhookEndpointResponse], error) {
	memberID, err := parseID("memberId", opaqueid.Member, req.Msg.GetMemberId())
	if err != nil {
		return nil, err
	}
	id, err := parseID("endpointId", opaqueid.Webhook, req.Msg.GetEndpointId())
	if err != nil {
		return nil, err
	}
	ep, err := s.enableEndpoint(ctx, nil, memberID, id, nil)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.EnableWebhookEndpointResponse{WebhookEndpoint: ep}), nil
}

// EnableClientWebhookEndpoint is EnableWebhookEndpoint for the settings
// page, as DisableClientWebhookEndpoint is for disabling: the workspace
// is the session's, and an endpoint of another client is not found.
func (s *Service) EnableClientWebhookEndpoint(ctx context.Context, workspaceID, memberID, clientID, endpointID string) (*adminv1.WebhookEndpoint, error) {
	ws, err := parseID("workspaceId", opaqueid.Workspace, workspaceID)
	if err != nil {
		return nil, err
	}
	member, err := parseID("memberId", opaqueid.Member, memberID)
	if err != nil {
		return nil, err
	}
	client, err := parseID("clientId", opaqueid.Client, clientID)
	if err != nil {
		return nil, err
	}
	id, err := parseID("endpointId", opaqueid.Webhook, endpointID)
	if err != nil {
		return nil, err
	}
	return s.enableEndpoint(ctx, &ws, member, id, &client)
}

// enableEndpoint enables the endpoint in the workspace (the member's own
// when ws is nil), of the client when client is set, on behalf of the
// member: under the row's lock, it checks the disabled reason
// (enableReasons), enables it, makes its deliveries not yet made with
// success due again (delivery.Resume) and audits, in one transaction;
// then it wakes this replica's delivery engine. An enabled endpoint is
// answered as it is (and the call audited, as a disable of a disabled one
// is).
func (s *Service) enableEndpoint(ctx context.Context, ws *uuid.UUID, memberID, id uuid.UUID, client *uuid.UUID) (*adminv1.WebhookEndpoint, error) {
	var wsID uuid.UUID
	if ws != nil {
		wsID = *ws
	}
	var row dbsqlc.WebhookAdminListRow
	resumed := false
	err := s.DB.WithTx(ctx, func(tx db.DBTX) error {
		if ws == nil {
			m, err := db.Q.SettingsMemberByID(ctx, tx, memberID)
			if errors.Is(err, db.ErrNotFound) {
				return apierror.New(apierror.CodeNotFound, "member not found")
			}
			if err != nil {
				return fmt.Errorf("get member: %w", err)
			}
			wsID = m.WorkspaceID
		}
		if err := authorize(ctx, tx, wsID, memberID); err != nil {
			return err
		}
		cur, err := db.Q.WebhookAdminGetForUpdate(ctx, tx, dbsqlc.WebhookAdminGetForUpdateParams{WorkspaceID: wsID, ID: id, ClientID: client})
		if errors.Is(err, db.ErrNotFound) {
			return apierror.New(apierror.CodeNotFound, "webhook endpoint not found")
		}
		if err != nil {
			return fmt.Errorf("get webhook endpoint: %w", err)
		}
		row = dbsqlc.WebhookAdminListRow(cur)
		if cur.Status == "disabled" {
			reason := ""
			if cur.DisabledReason != nil {
				reason = *cur.DisabledReason
			}
			if !enableReasons[reason] {
				why := notEnabled[reason]
				if why == "" {
					why = "the endpoint was disabled for a reason an administrator cannot undo (" + reason + ")"
				}
				return apierror.New(apierror.CodeFailedPrecondition, why)
			}
			enabled, err := db.Q.WebhookAdminEnable(ctx, tx, dbsqlc.WebhookAdminEnableParams{WorkspaceID: wsID, ID: id})
			if err != nil {
				return fmt.Errorf("enable webhook endpoint: %w", err)
			}
			if err := delivery.Resume(ctx, tx, wsID, id); err != nil {
				return fmt.Errorf("resume webhook endpoint: %w", err)
			}
			row, resumed = dbsqlc.WebhookAdminListRow(enabled), true
		}
		return audit(ctx, tx, event{workspace: wsID, actor: &memberID, action: ActionWebhookEnable, client: &row.ClientID,
			target: ptr(opaqueid.Format(opaqueid.Webhook, row.ID))})
	})
	if err != nil {
		return nil, s.auditRefusal(ctx, err, event{workspace: wsID, actor: &memberID, action: ActionWebhookEnable, client: client})
	}
	if resumed && s.WebhooksChanged != nil {
		s.WebhooksChanged()
	}
	return endpointProto(row), nil
}

// MaxHealthEndpoints bounds the endpoints of one health read: a client
// has at most 16 (service/webhook), the page asks for one client's.
const MaxHealthEndpoints = 64

// MaxPendingCounted is where the count of an endpoint's pending
// deliveries stops (EndpointHealth.Pending); the delivery engine's own
// bound is PARTNER_WEBHOOK_MAX_PENDING (default 100,000).
const MaxPendingCounted = 100_000

// HealthHours is the span of EndpointHealth.Hours, one bucket an hour.
const HealthHours = 24

// HourAttempts counts one hour's ended attempts of an endpoint.
type HourAttempts struct {
	// Start is the hour's start.
	Start             time.Time
	Succeeded, Failed int64
}

// EndpointHealth is how an endpoint's deliveries fare, as the settings
// page shows it beside the endpoint.
type EndpointHealth struct {
	// LastSuccess is the endpoint's last successful attempt (noted at
	// most once a second); nil: none yet.
	LastSuccess *time.Time
	// FailingSince is its first failed attempt after the last success,
	// while its newest attempt failed; nil: not failing (or no attempt
	// kept in the delivery log).
	FailingSince *time.Time
	// Pending counts its pending deliveries up to MaxPendingCounted;
	// PendingMore: there are more.
	Pending     int64
	PendingMore bool
	// Hours are the last 24 hours, oldest first; the last is the hour
	// now is in.
	Hours [HealthHours]HourAttempts
}

// WebhookHealth reads the health of some endpoints of a client of the
// workspace for the member (checked as every admin call is, but not
// audited: the page reads it beside ListWebhookEndpoints, which is). An
// id that is not one of the client's endpoints has no entry. Every query
// is bounded by the endpoints (at most MaxHealthEndpoints) and an index
// range each (db/queries/webhook_admin.sql).
func (s *Service) WebhookHealth(ctx context.Context, workspaceID, memberID, clientID string, endpointIDs []string, now time.Time) (map[string]*EndpointHealth, error) {
	ws, err := parseID("workspaceId", opaqueid.Workspace, workspaceID)
	if err != nil {
		return nil, err
	}
	member, err := parseID("memberId", opaqueid.Member, memberID)
	if err != nil {
		return nil, err
	}
	client, err := parseID("clientId", opaqueid.Client, clientID)
	if err != nil {
		return nil, err
	}
	if len(endpointIDs) > MaxHealthEndpoints {
		return nil, apierror.New(apierror.CodeValidationFailed, fmt.Sprintf("at most %d endpoints at once", MaxHealthEndpoints))
	}
	ids := make([]uuid.UUID, 0, len(endpointIDs))
	for _, e := range endpointIDs {
		id, err := parseID("endpointId", opaqueid.Webhook, e)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	since := now.UTC().Truncate(time.Hour).Add(-(HealthHours - 1) * time.Hour)
	until := since.Add(HealthHours * time.Hour)
	out := map[string]*EndpointHealth{}
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		if err := authorize(ctx, tx, ws, member); err != nil {
			return err
		}
		// The client's own endpoints only: another client's ids are
		// dropped here, so no later query reads them.
		own, err := db.Q.WebhookAdminList(ctx, tx, dbsqlc.WebhookAdminListParams{WorkspaceID: ws, ClientID: &client})
		if err != nil {
			return fmt.Errorf("list webhook endpoints: %w", err)
		}
		mine := map[uuid.UUID]bool{}
		for _, r := range own {
			mine[r.ID] = true
		}
		kept := ids[:0]
		for _, id := range ids {
			if mine[id] {
				kept = append(kept, id)
			}
		}
		if len(kept) == 0 {
			return nil
		}
		rows, err := db.Q.WebhookAdminHealth(ctx, tx, dbsqlc.WebhookAdminHealthParams{WorkspaceID: ws, IDs: kept, MaxPending: MaxPendingCounted + 1})
		if err != nil {
			return fmt.Errorf("read webhook health: %w", err)
		}
		for _, r := range rows {
			h := &EndpointHealth{LastSuccess: r.LastSuccessAt, Pending: min(r.Pending, MaxPendingCounted), PendingMore: r.Pending > MaxPendingCounted}
			for i := range h.Hours {
				h.Hours[i].Start = since.Add(time.Duration(i) * time.Hour)
			}
			out[opaqueid.Format(opaqueid.Webhook, r.ID)] = h
		}
		failing, err := db.Q.WebhookAdminFailingSince(ctx, tx, dbsqlc.WebhookAdminFailingSinceParams{WorkspaceID: ws, IDs: kept})
		if err != nil {
			return fmt.Errorf("read webhook failures: %w", err)
		}
		for _, f := range failing {
			if h := out[opaqueid.Format(opaqueid.Webhook, f.ID)]; h != nil {
				h.FailingSince = &f.FailingSince
			}
		}
		hours, err := db.Q.WebhookAdminAttemptHours(ctx, tx, dbsqlc.WebhookAdminAttemptHoursParams{WorkspaceID: ws, IDs: kept, Since: since, Until: until})
		if err != nil {
			return fmt.Errorf("count webhook attempts: %w", err)
		}
		for _, a := range hours {
			h := out[opaqueid.Format(opaqueid.Webhook, a.EndpointID)]
			i := int(a.Hour.Sub(since) / time.Hour)
			if h == nil || i < 0 || i >= HealthHours {
				continue
			}
			h.Hours[i].Succeeded, h.Hours[i].Failed = a.Succeeded, a.Failed
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
