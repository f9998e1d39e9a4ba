package admin

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/opaqueid"
)

// Audit actions of an administrator on webhook endpoints (product.md,
// "Events and webhooks": admins see and disable their clients'
// endpoints). The client's own changes are audited by service/webhook,
// with no acting member.
const (
	// ActionWebhookList is a read of the workspace's endpoints.
	ActionWebhookList = "webhook_endpoint.list"
	// ActionWebhookDisable is an administrator's disabling of an
	// endpoint; the event names the endpoint's client.
	ActionWebhookDisable = "webhook_endpoint.disable"
)

// ListWebhookEndpoints lists the endpoints of the workspace's clients (of
// one client when client_id is set), never with a secret. The read is
// audited, as a list of clients is.
func (s *Service) ListWebhookEndpoints(ctx context.Context, req *connect.Request[adminv1.ListWebhookEndpointsRequest]) (*connect.Response[adminv1.ListWebhookEndpointsResponse], error) {
	wsID, err := parseID("workspaceId", opaqueid.Workspace, req.Msg.GetWorkspaceId())
	if err != nil {
		return nil, err
	}
	memberID, err := parseID("memberId", opaqueid.Member, req.Msg.GetMemberId())
	if err != nil {
		return nil, err
	}
	var clientID *uuid.UUID
	if c := req.Msg.GetClientId(); c != "" {
		id, err := parseID("clientId", opaqueid.Client, c)
		if err != nil {
			return nil, err
		}
		clientID = &id
	}
	e := event{workspace: wsID, actor: &memberID, action: ActionWebhookList, client: clientID}
	var rows []dbsqlc.WebhookAdminListRow
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		if err := authorize(ctx, tx, wsID, memberID); err != nil {
			return err
		}
		rows, err = db.Q.WebhookAdminList(ctx, tx, dbsqlc.WebhookAdminListParams{WorkspaceID: wsID, ClientID: clientID})
		if err != nil {
			return fmt.Errorf("list webhook endpoints: %w", err)
		}
		return audit(ctx, tx, e)
	})
	if err != nil {
		return nil, s.auditRefusal(ctx, err, e)
	}
	out := &adminv1.ListWebhookEndpointsResponse{WebhookEndpoints: make([]*adminv1.WebhookEndpoint, 0, len(rows))}
	for _, r := range rows {
		out.WebhookEndpoints = append(out.WebhookEndpoints, endpointProto(r))
	}
	return connect.NewResponse(out), nil
}

// DisableWebhookEndpoint disables an endpoint of a client of the acting
// member's workspace. An endpoint of another workspace is not found.
func (s *Service) DisableWebhookEndpoint(ctx context.Context, req *connect.Request[adminv1.DisableWebhookEndpointRequest]) (*connect.Response[adminv1.DisableWebhookEndpointResponse], error) {
	memberID, err := parseID("memberId", opaqueid.Member, req.Msg.GetMemberId())
	if err != nil {
		return nil, err
	}
	id, err := parseID("endpointId", opaqueid.Webhook, req.Msg.GetEndpointId())
	if err != nil {
		return nil, err
	}
	ep, err := s.disableEndpoint(ctx, nil, memberID, id, nil)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.DisableWebhookEndpointResponse{WebhookEndpoint: ep}), nil
}

// DisableClientWebhookEndpoint is DisableWebhookEndpoint for the settings
// page, which names the workspace (the session's), the member, and the
// client whose page the "Disable" button is on: an endpoint of another
// client is not found. It runs the RPC's code, audited the same way.
func (s *Service) DisableClientWebhookEndpoint(ctx context.Context, workspaceID, memberID, clientID, endpointID string) (*adminv1.WebhookEndpoint, error) {
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
	return s.disableEndpoint(ctx, &ws, member, id, &client)
}

// disableEndpoint disables the endpoint in the workspace (the member's
// own when ws is nil), of the client when client is set, on behalf of the
// member, audited in the same transaction; a refusal is audited after it.
// The member is checked before the endpoint is looked for, so a member
// without access learns nothing of which endpoints exist.
func (s *Service) disableEndpoint(ctx context.Context, ws *uuid.UUID, memberID, id uuid.UUID, client *uuid.UUID) (*adminv1.WebhookEndpoint, error) {
	var wsID uuid.UUID
	if ws != nil {
		wsID = *ws
	}
	var row dbsqlc.WebhookAdminDisableRow
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
		var err error
		row, err = db.Q.WebhookAdminDisable(ctx, tx, dbsqlc.WebhookAdminDisableParams{WorkspaceID: wsID, ID: id, ClientID: client})
		if errors.Is(err, db.ErrNotFound) {
			return apierror.New(apierror.CodeNotFound, "webhook endpoint not found")
		}
		if err != nil {
			return fmt.Errorf("disable webhook endpoint: %w", err)
		}
		return audit(ctx, tx, event{workspace: wsID, actor: &memberID, action: ActionWebhookDisable, client: &row.ClientID,
			target: ptr(opaqueid.Format(opaqueid.Webhook, row.ID))})
	})
	if err != nil {
		// wsID is known whenever a refusal can happen: the member exists.
		return nil, s.auditRefusal(ctx, err, event{workspace: wsID, actor: &memberID, action: ActionWebhookDisable, client: client})
	}
	return endpointProto(dbsqlc.WebhookAdminListRow(row)), nil
}

func endpointProto(r dbsqlc.WebhookAdminListRow) *adminv1.WebhookEndpoint {
	out := &adminv1.WebhookEndpoint{
		Id: opaqueid.Format(opaqueid.Webhook, r.ID), WorkspaceId: opaqueid.Format(opaqueid.Workspace, r.WorkspaceID),
		ClientId: opaqueid.Format(opaqueid.Client, r.ClientID), Url: r.Url, EventTypes: r.EventTypes,
		Description: r.Description, Status: r.Status,
		CreatedAt: timestamppb.New(r.CreatedAt), UpdatedAt: timestamppb.New(r.UpdatedAt),
	}
	if r.DisabledReason != nil {
		out.DisabledReason = *r.DisabledReason
	}
	if r.LastSuccessAt != nil {
		out.LastSuccessAt = timestamppb.New(*r.LastSuccessAt)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
