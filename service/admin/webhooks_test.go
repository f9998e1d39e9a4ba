package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// seedEndpoint inserts an enabled webhook endpoint of the client, as the
// client's own API would, and returns its id ("whe_…").
func seedEndpoint(t *testing.T, raw *pgxpool.Pool, ws, client, url string) string {
	t.Helper()
	wsID, _ := opaqueid.Parse(opaqueid.Workspace, ws)
	cid, _ := opaqueid.Parse(opaqueid.Client, client)
	id := uuid.Must(uuid.NewV7())
	if _, err := raw.Exec(context.Background(), `INSERT INTO webhook_endpoints
		(workspace_id, id, client_id, url, event_types, description, secret, after_xid, after_seq)
		VALUES ($1, $2, $3, $4, '{lead.created,lead.updated}', 'CRM sync', 'whsec_c2VjcmV0LW5ldmVyLWxpc3RlZA==', 0, 0)`,
		wsID, id, cid, url); err != nil {
		t.Fatalf("seed webhook endpoint: %v", err)
	}
	return opaqueid.Format(opaqueid.Webhook, id)
}

// auditRows lists the workspace's audit events of an action, oldest first,
// as "outcome reason actor client".
func auditRows(t *testing.T, h *servertest.Harness, ws, member, action string) []string {
	t.Helper()
	res, err := h.AdminClient.ListAuditEvents(context.Background(), connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: member}))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range res.Msg.GetEvents() {
		if e.GetAction() == action {
			out = append(out, strings.Join([]string{e.GetOutcome(), e.GetReason(), e.GetActorMemberId(), e.GetClientId()}, " "))
		}
	}
	slices.Reverse(out)
	return out
}

// TestAdminWebhookEndpoints: an approved member with settings access lists
// the endpoints of the workspace's clients (only that workspace's, never
// a secret; one client's with clientId) and disables one (status
// disabled, reason admin, audited with the endpoint's client). A member
// without settings access, or of another workspace, is refused and the
// refusal audited; another workspace's endpoint is not found, and
// unchanged. Over REST too.
func TestAdminWebhookEndpoints(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	ws, admin := h.Workspace("Hooks Admin")
	other, otherAdmin := h.Workspace("Hooks Other")
	c1, _ := h.Client(ws, admin, "leads:read")
	c2, _ := h.Client(ws, admin, "leads:read")
	oc, _ := h.Client(other, otherAdmin, "leads:read")
	e1 := seedEndpoint(t, raw, ws, c1, "https://hooks.example.com/one")
	e2 := seedEndpoint(t, raw, ws, c2, "https://hooks.example.com/two")
	foreign := seedEndpoint(t, raw, other, oc, "https://hooks.example.com/other")

	list := func(member, client string) ([]*adminv1.WebhookEndpoint, error) {
		res, err := h.AdminClient.ListWebhookEndpoints(ctx, connect.NewRequest(&adminv1.ListWebhookEndpointsRequest{WorkspaceId: ws, MemberId: member, ClientId: client}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetWebhookEndpoints(), nil
	}
	got, err := list(admin, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].GetId() != e1 || got[1].GetId() != e2 {
		t.Fatalf("list = %v, want %s and %s (oldest first, this workspace only)", got, e1, e2)
	}
	first := got[0]
	if first.GetClientId() != c1 || first.GetWorkspaceId() != ws || first.GetUrl() != "https://hooks.example.com/one" ||
		!slices.Equal(first.GetEventTypes(), []string{"lead.created", "lead.updated"}) || first.GetDescription() != "CRM sync" ||
		first.GetStatus() != "enabled" || first.GetDisabledReason() != "" || first.GetCreatedAt() == nil {
		t.Fatalf("endpoint = %v", first)
	}
	if got, err := list(admin, c2); err != nil || len(got) != 1 || got[0].GetId() != e2 {
		t.Fatalf("list of %s = %v, %v; want %s alone", c2, got, err, e2)
	}

	// A member without settings access is refused, and the refusal is in
	// the log; so is a member of another workspace.
	plain, err := h.AdminClient.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: ws, Email: "plain@hooks-admin.test"}))
	if err != nil {
		t.Fatal(err)
	}
	p := plain.Msg.GetId()
	_, err = list(p, "")
	servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
	_, err = list(otherAdmin, "")
	servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
	_, err = h.AdminClient.DisableWebhookEndpoint(ctx, connect.NewRequest(&adminv1.DisableWebhookEndpointRequest{EndpointId: e1, MemberId: p}))
	servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
	wantList := []string{
		"succeeded  " + admin + " ", "succeeded  " + admin + " " + c2,
		"refused no_settings_access " + p + " ", "refused not_a_member " + otherAdmin + " ",
	}
	if rows := auditRows(t, h, ws, admin, "webhook_endpoint.list"); !slices.Equal(rows, wantList) {
		t.Fatalf("webhook_endpoint.list audit = %q, want %q", rows, wantList)
	}

	// Disable: status disabled, reason admin, audited with the client.
	res, err := h.AdminClient.DisableWebhookEndpoint(ctx, connect.NewRequest(&adminv1.DisableWebhookEndpointRequest{EndpointId: e1, MemberId: admin}))
	if err != nil {
		t.Fatal(err)
	}
	if ep := res.Msg.GetWebhookEndpoint(); ep.GetId() != e1 || ep.GetStatus() != "disabled" || ep.GetDisabledReason() != "admin" || ep.GetClientId() != c1 {
		t.Fatalf("disable answered %v", ep)
	}
	var status, reason string
	e1ID, _ := opaqueid.Parse(opaqueid.Webhook, e1)
	if err := raw.QueryRow(ctx, `SELECT status, disabled_reason FROM webhook_endpoints WHERE id = $1`, e1ID).Scan(&status, &reason); err != nil ||
		status != "disabled" || reason != "admin" {
		t.Fatalf("row after disable: %s %s %v", status, reason, err)
	}

	// Another workspace's endpoint is not found, and stays enabled.
	_, err = h.AdminClient.DisableWebhookEndpoint(ctx, connect.NewRequest(&adminv1.DisableWebhookEndpointRequest{EndpointId: foreign, MemberId: admin}))
	servertest.AssertConnectError(t, err, connect.CodeNotFound, "not_found")
	foreignID, _ := opaqueid.Parse(opaqueid.Webhook, foreign)
	if err := raw.QueryRow(ctx, `SELECT status FROM webhook_endpoints WHERE id = $1`, foreignID).Scan(&status); err != nil || status != "enabled" {
		t.Fatalf("another workspace's endpoint: %s %v", status, err)
	}
	// An id of another kind is a bad request naming the field.
	if code, body := restCall(t, h, "POST", "/admin/v1/webhook-endpoints/"+c1+":disable", `{"memberId":"`+admin+`"}`); code != http.StatusBadRequest || !strings.Contains(body, "endpointId") {
		t.Fatalf("a client id as the endpoint: %d %s", code, body)
	}

	// Over REST: the list never carries a secret; disable by POST.
	code, body := restCall(t, h, "GET", "/admin/v1/workspaces/"+ws+"/webhook-endpoints?memberId="+admin, "")
	if code != http.StatusOK || strings.Contains(body, "whsec_") || !strings.Contains(body, `"disabledReason":"admin"`) || !strings.Contains(body, e2) {
		t.Fatalf("REST list: %d %s", code, body)
	}
	code, body = restCall(t, h, "POST", "/admin/v1/webhook-endpoints/"+e2+":disable", `{"memberId":"`+admin+`"}`)
	var out struct {
		WebhookEndpoint struct{ ID, Status, DisabledReason string }
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || out.WebhookEndpoint.Status != "disabled" || out.WebhookEndpoint.DisabledReason != "admin" {
		t.Fatalf("REST disable: %d %s", code, body)
	}
	wantDisable := []string{
		"refused no_settings_access " + p + " ", "succeeded  " + admin + " " + c1, "succeeded  " + admin + " " + c2,
	}
	if rows := auditRows(t, h, ws, admin, "webhook_endpoint.disable"); !slices.Equal(rows, wantDisable) {
		t.Fatalf("webhook_endpoint.disable audit = %q, want %q", rows, wantDisable)
	}
}

func restCall(t *testing.T, h *servertest.Harness, method, path, body string) (int, string) {
	t.Helper()
	code, b, err := servertest.Call(method, h.Admin.URL+path, "", body)
	if err != nil {
		t.Fatal(err)
	}
	return code, string(b)
}
