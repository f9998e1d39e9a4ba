package admin_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// endpointState is an endpoint's status and disabled reason ("enabled",
// "disabled credentials_revoked").
func endpointState(t *testing.T, raw *pgxpool.Pool, id string) string {
	t.Helper()
	u, _ := opaqueid.Parse(opaqueid.Webhook, id)
	var st string
	var reason *string
	if err := raw.QueryRow(context.Background(), `SELECT status, disabled_reason FROM webhook_endpoints WHERE id = $1`, u).Scan(&st, &reason); err != nil {
		t.Fatal(err)
	}
	if reason != nil {
		st += " " + *reason
	}
	return st
}

// disableEndpoint sets an endpoint's disabled reason directly, as the
// client (manual) or an administrator (admin) would have.
func disableEndpoint(t *testing.T, raw *pgxpool.Pool, id, reason string) {
	t.Helper()
	u, _ := opaqueid.Parse(opaqueid.Webhook, id)
	if _, err := raw.Exec(context.Background(), `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = $2 WHERE id = $1`, u, reason); err != nil {
		t.Fatal(err)
	}
}

// clientActions are the workspace's audit actions about a client by the
// member, oldest first.
func clientActions(t *testing.T, h *servertest.Harness, ws, member, client string) []string {
	t.Helper()
	var out []string
	for _, e := range auditLog(t, h, ws, member) {
		if e.GetClientId() == client && e.GetActorMemberId() == member {
			out = append(out, e.GetAction())
		}
	}
	slices.Reverse(out)
	return out
}

// TestDisableWebhooksCutsOffTheClientsEndpoints: with disable_webhooks,
// RotateApiClientSecret and DeactivateApiClient with revoke_tokens disable
// every webhook endpoint of the client in their transaction
// (credentials_revoked), audited as api_client.disable_webhooks; an
// endpoint an administrator disabled keeps its reason, and another
// client's or workspace's endpoints are untouched. Without the flag a
// rotation leaves the endpoints as they are (the documented behaviour:
// an endpoint made with a leaked secret kept receiving), and activating
// a client does not enable them again. disable_webhooks without
// revoke_tokens is refused (a plain deactivation is a pause). Revocation
// disables the endpoints for good (client_revoked) with the flag or
// without it; the flag is audited. Over REST too. Before, the flag did
// not exist and every endpoint stayed enabled.
func TestDisableWebhooksCutsOffTheClientsEndpoints(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	ws, m := h.Workspace("Leaked Secret Admin")
	other, om := h.Workspace("Leaked Secret Other")
	rotated, _ := h.Client(ws, m, "leads:read")
	bystander, _ := h.Client(ws, m, "leads:read")
	foreign, _ := h.Client(other, om, "leads:read")
	thief := seedEndpoint(t, raw, ws, rotated, "https://thief.example/collect")
	paused := seedEndpoint(t, raw, ws, rotated, "https://hooks.example.com/paused")
	disableEndpoint(t, raw, paused, "manual")
	byAdmin := seedEndpoint(t, raw, ws, rotated, "https://hooks.example.com/by-admin")
	disableEndpoint(t, raw, byAdmin, "admin")
	kept := seedEndpoint(t, raw, ws, bystander, "https://hooks.example.com/bystander")
	elsewhere := seedEndpoint(t, raw, other, foreign, "https://hooks.example.com/elsewhere")

	// Without the flag a rotation leaves every endpoint as it was.
	if _, err := h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: rotated, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	if got := endpointState(t, raw, thief); got != "enabled" {
		t.Fatalf("after a rotation without disable_webhooks the endpoint is %q, want enabled (documented)", got)
	}
	res, err := h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: rotated, MemberId: m, DisableWebhooks: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Msg.GetClientSecret(), "svcs_") {
		t.Fatalf("rotate with disable_webhooks answered %v", res.Msg)
	}
	for id, want := range map[string]string{
		thief: "disabled credentials_revoked", paused: "disabled credentials_revoked", byAdmin: "disabled admin",
		kept: "enabled", elsewhere: "enabled",
	} {
		if got := endpointState(t, raw, id); got != want {
			t.Errorf("after rotate-secret with disable_webhooks, endpoint %s is %q, want %q", id, got, want)
		}
	}
	want := []string{"api_client.create", "api_client.rotate_secret", "api_client.rotate_secret", "api_client.disable_webhooks"}
	if got := clientActions(t, h, ws, m, rotated); !slices.Equal(got, want) {
		t.Errorf("audit of %s: %q, want %q", rotated, got, want)
	}
	// The admin list shows why.
	list, err := h.AdminClient.ListWebhookEndpoints(ctx, connect.NewRequest(&adminv1.ListWebhookEndpointsRequest{WorkspaceId: ws, MemberId: m, ClientId: rotated}))
	if err != nil {
		t.Fatal(err)
	}
	if e := list.Msg.GetWebhookEndpoints()[0]; e.GetId() != thief || e.GetStatus() != "disabled" || e.GetDisabledReason() != "credentials_revoked" {
		t.Errorf("webhook list: %v", e)
	}

	// deactivate: disable_webhooks needs revoke_tokens, and is refused
	// without changing anything.
	deactivated, _ := h.Client(ws, m, "leads:read")
	dep := seedEndpoint(t, raw, ws, deactivated, "https://thief.example/deactivated")
	_, err = h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: deactivated, MemberId: m, DisableWebhooks: true}))
	ce := servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
	servertest.AssertField(t, "deactivate with disable_webhooks alone", ce, "disableWebhooks")
	clients, err := h.AdminClient.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: ws, MemberId: m}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients.Msg.GetClients() {
		if c.GetClientId() == deactivated && c.GetStatus() != "active" {
			t.Errorf("a refused deactivation changed the client: %s", c.GetStatus())
		}
	}
	if got := endpointState(t, raw, dep); got != "enabled" {
		t.Errorf("a refused deactivation changed the endpoint: %s", got)
	}
	// With revoke_tokens the endpoints go, and activation does not bring
	// them back.
	if _, err := h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{
		ClientId: deactivated, MemberId: m, RevokeTokens: true, DisableWebhooks: true})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: deactivated, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	if got := endpointState(t, raw, dep); got != "disabled credentials_revoked" {
		t.Errorf("after deactivate --revoke-tokens --disable-webhooks and activate the endpoint is %q", got)
	}
	want = []string{"api_client.create", "api_client.deactivate", "api_client.revoke_tokens", "api_client.disable_webhooks", "api_client.activate"}
	if got := clientActions(t, h, ws, m, deactivated); !slices.Equal(got, want) {
		t.Errorf("audit of %s: %q, want %q", deactivated, got, want)
	}

	// Revocation disables them for good, flag or not; the flag is audited.
	for _, flag := range []bool{false, true} {
		c, _ := h.Client(ws, m, "leads:read")
		e := seedEndpoint(t, raw, ws, c, "https://thief.example/revoked")
		if _, err := h.AdminClient.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: c, MemberId: m, DisableWebhooks: flag})); err != nil {
			t.Fatal(err)
		}
		if got := endpointState(t, raw, e); got != "disabled client_revoked" {
			t.Errorf("revoke (disable_webhooks %v): the endpoint is %q, want disabled client_revoked", flag, got)
		}
		want := []string{"api_client.create", "api_client.revoke"}
		if flag {
			want = append(want, "api_client.disable_webhooks")
		}
		if got := clientActions(t, h, ws, m, c); !slices.Equal(got, want) {
			t.Errorf("audit of revoke (disable_webhooks %v): %q, want %q", flag, got, want)
		}
	}

	// Over REST: the JSON field is disableWebhooks.
	viaREST, _ := h.Client(ws, m, "leads:read")
	re := seedEndpoint(t, raw, ws, viaREST, "https://thief.example/rest")
	if code, body := restCall(t, h, http.MethodPost, "/admin/v1/clients/"+viaREST+":rotateSecret",
		`{"memberId":"`+m+`","disableWebhooks":true}`); code != http.StatusOK || !strings.Contains(body, `"clientSecret":"svcs_`) {
		t.Fatalf("POST :rotateSecret: %d %s", code, body)
	}
	if got := endpointState(t, raw, re); got != "disabled credentials_revoked" {
		t.Errorf("after :rotateSecret with disableWebhooks over REST the endpoint is %q", got)
	}
}
