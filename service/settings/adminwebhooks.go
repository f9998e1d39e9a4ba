package settings

import (
	"context"
	"time"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/service/admin"
)

// AdminWebhooks is the page's Webhooks source on the admin service: the
// list is ListWebhookEndpoints (with each endpoint's health beside it,
// admin.Service.WebhookHealth), and "Disable" and "Enable" are
// DisableWebhookEndpoint's and EnableWebhookEndpoint's code, limited to
// the client whose page it is, so that the page's actions are checked and
// audited exactly as the RPCs and the CLI are.
type AdminWebhooks struct {
	Admin *admin.Service
}

var _ Webhooks = AdminWebhooks{}

// ListEndpoints lists the client's endpoints through ListWebhookEndpoints
// (an audited read, as the client list is).
func (a AdminWebhooks) ListEndpoints(ctx context.Context, workspaceID, memberID, clientID string) ([]WebhookEndpoint, error) {
	res, err := a.Admin.ListWebhookEndpoints(ctx, connect.NewRequest(&adminv1.ListWebhookEndpointsRequest{
		WorkspaceId: workspaceID, MemberId: memberID, ClientId: clientID,
	}))
	if err != nil {
		return nil, err
	}
	out := make([]WebhookEndpoint, 0, len(res.Msg.GetWebhookEndpoints()))
	for _, e := range res.Msg.GetWebhookEndpoints() {
		status := e.GetStatus()
		if r := e.GetDisabledReason(); r != "" {
			status += " (" + r + ")"
		}
		// The admin service answers the stored URL; one stored before
		// hosts were kept as A-labels is shown with them (and with what
		// does not show percent-encoded), so that none reads as something
		// else here.
		u := outbound.DisplayURL(e.GetUrl())
		out = append(out, WebhookEndpoint{ID: e.GetId(), URL: u, Status: status, Disabled: e.GetStatus() == "disabled",
			CanEnable: e.GetStatus() == "disabled" && admin.CanEnableWebhook(e.GetDisabledReason())})
	}
	if len(out) == 0 {
		return out, nil
	}
	ids := make([]string, len(out))
	for i, e := range out {
		ids[i] = e.ID
	}
	now := time.Now
	if a.Admin.Now != nil {
		now = a.Admin.Now
	}
	health, err := a.Admin.WebhookHealth(ctx, workspaceID, memberID, clientID, ids, now())
	if err != nil {
		return nil, err
	}
	for i := range out {
		if h := health[out[i].ID]; h != nil {
			out[i].Health = toHealth(h)
		}
	}
	return out, nil
}

// DisableEndpoint disables one endpoint of the client.
func (a AdminWebhooks) DisableEndpoint(ctx context.Context, workspaceID, memberID, clientID, endpointID string) error {
	_, err := a.Admin.DisableClientWebhookEndpoint(ctx, workspaceID, memberID, clientID, endpointID)
	return err
}

// EnableEndpoint enables again one endpoint of the client.
func (a AdminWebhooks) EnableEndpoint(ctx context.Context, workspaceID, memberID, clientID, endpointID string) error {
	_, err := a.Admin.EnableClientWebhookEndpoint(ctx, workspaceID, memberID, clientID, endpointID)
	return err
}
