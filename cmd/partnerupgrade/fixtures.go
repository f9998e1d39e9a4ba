package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
)

// allScopes are every scope a client can hold: the load uses them all.
var allScopes = []string{"contacts:read", "contacts:write", "leads:read", "leads:write", "webhooks:read", "webhooks:write", "apps:read"}

// eventTypes are every event type a webhook endpoint can subscribe to.
var eventTypes = []string{"contact.created", "contact.updated", "contact.deleted", "lead.created", "lead.updated", "lead.deleted"}

// fastRate is the client's own read and write rate: its limiter stays on
// (the replicas' defaults are off), but never refuses the load.
var fastRate int32 = 1_000_000

// fixtures makes, through the first replica (the previous release), what a
// partner has before the upgrade: a workspace, an approved member with
// settings access, an API client with every scope, a token, and a webhook
// endpoint of every event type pointing at the receiver.
func fixtures(ctx context.Context, r *replica, hooks *receiver) (*tenant, error) {
	admin := adminv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+r.admin)
	ws, err := admin.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "Upgrade Co"}))
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	m, err := admin.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: ws.Msg.GetId(), Email: "ops@upgrade.test", SettingsAccess: true}))
	if err != nil {
		return nil, fmt.Errorf("add member: %w", err)
	}
	cl, err := admin.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{WorkspaceId: ws.Msg.GetId(), MemberId: m.Msg.GetId(),
		Name: "upgrade", Scopes: allScopes, ReadRate: &fastRate, WriteRate: &fastRate}))
	if err != nil {
		return nil, fmt.Errorf("create api client: %w", err)
	}
	t := &tenant{clientID: cl.Msg.GetClientId(), secret: cl.Msg.GetClientSecret()}
	a := t.tokenCall().send(r)
	if a.status != http.StatusOK {
		return nil, fmt.Errorf("request token: %d %s", a.status, short(a.body))
	}
	tok, err := accessToken(a.body)
	if err != nil {
		return nil, err
	}
	t.token.Store(&tok)

	a = t.jsonCall(http.MethodPost, "/api/v1/webhook-endpoints", map[string]any{"url": hooks.url(), "eventTypes": eventTypes}, "hook-1").send(r)
	if a.status != http.StatusCreated {
		return nil, fmt.Errorf("create webhook endpoint: %d %s", a.status, short(a.body))
	}
	var hook struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(a.body, &hook); err != nil {
		return nil, fmt.Errorf("read webhook endpoint: %w", err)
	}
	if err := hooks.setSecret(hook.Secret); err != nil {
		return nil, err
	}
	return t, nil
}
