package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/service/servertest"
)

// TestAdminRefusals: each kind of member that may not manage clients is
// refused with PermissionDenied, and unknown scopes are rejected.
func TestAdminRefusals(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	ws, admin := h.Workspace("Admin Co")
	otherWS, otherAdmin := h.Workspace("Other Co")
	addMember := func(email string, settings, pending bool) string {
		res, err := h.AdminClient.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{
			WorkspaceId: ws, Email: email, SettingsAccess: settings, Pending: pending}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Msg.GetApproved() == pending || res.Msg.GetSettingsAccess() != settings {
			t.Fatalf("member = %v", res.Msg)
		}
		return res.Msg.GetId()
	}
	noSettings := addMember("viewer@admin.test", false, false)
	pending := addMember("new@admin.test", true, true)
	clientID, _ := h.Client(ws, admin, "contacts:read")

	for name, member := range map[string]string{
		"member without settings access": noSettings,
		"pending member":                 pending,
		"member of another workspace":    otherAdmin,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.AdminClient.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{
				WorkspaceId: ws, MemberId: member, Name: "x", Scopes: []string{"contacts:read"}}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
			_, err = h.AdminClient.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: ws, MemberId: member}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
			_, err = h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: clientID, MemberId: member}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
			_, err = h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: clientID, MemberId: member}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
			_, err = h.AdminClient.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: clientID, MemberId: member}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
			_, err = h.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: clientID, MemberId: member}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
			rate := int32(1)
			_, err = h.AdminClient.SetApiClientRates(ctx, connect.NewRequest(&adminv1.SetApiClientRatesRequest{ClientId: clientID, MemberId: member, ReadRate: &rate}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
			_, err = h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: member}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
		})
	}
	// The other workspace's admin cannot create a client in this workspace
	// even by naming it.
	_, err := h.AdminClient.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{
		WorkspaceId: otherWS, MemberId: admin, Name: "x", Scopes: []string{"contacts:read"}}))
	servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")

	_, err = h.AdminClient.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{
		WorkspaceId: ws, MemberId: admin, Name: "x", Scopes: []string{"contacts:read", "contacts:delete"}}))
	servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
	_, err = h.AdminClient.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{
		WorkspaceId: ws, MemberId: admin, Name: "x"}))
	servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
}

// TestAdminToken: with PARTNER_ADMIN_TOKEN set, a call without it is
// refused.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, servertest.Options{AdminToken: "s3cret-admin"})
	ws, _ := h.Workspace("Guarded") // the harness client sends the token
	if ws == "" {
		t.Fatal("no workspace")
	}
	for name, token := range map[string]string{"missing": "", "wrong": "nope"} {
		t.Run(name, func(t *testing.T) {
			req := connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "x"})
			if token != "" {
				req.Header().Set("Authorization", "Bearer "+token)
			}
			c := h.AdminClientWithoutToken()
			_, err := c.CreateWorkspace(context.Background(), req)
			servertest.AssertConnectError(t, err, connect.CodeUnauthenticated, "unauthenticated")
		})
	}
}

// TestClientLifecycle: rotate, deactivate, activate and revoke take effect
// on the very next request, list never shows a secret, and each action is
// audited with its actor.
func TestClientLifecycle(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	ws, admin := h.Workspace("Lifecycle Co")
	id, sec := h.Client(ws, admin, "contacts:read")
	tok := h.Token(id, sec, "")
	me := func(tok string) int {
		s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tok, "", "")
		return s
	}
	tokenStatus := func(id, sec string) int {
		s, _, _ := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded",
			url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode())
		return s
	}

	// Rotate: the old secret and the old tokens stop working at once.
	rot, err := h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: id, MemberId: admin}))
	if err != nil {
		t.Fatal(err)
	}
	newSec := rot.Msg.GetClientSecret()
	if newSec == "" || newSec == sec || rot.Msg.GetClient().GetSecretRotatedAt() == nil {
		t.Fatalf("rotate response = %v", rot.Msg)
	}
	if s := tokenStatus(id, sec); s != 401 {
		t.Fatalf("old secret after rotation: %d", s)
	}
	if s := me(tok); s != 401 {
		t.Fatalf("old token after rotation: %d", s)
	}
	tok = h.Token(id, newSec, "")
	if s := me(tok); s != 200 {
		t.Fatalf("new token: %d", s)
	}

	// Deactivate: tokens and issuance refused; activate restores both.
	if _, err := h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: admin})); err != nil {
		t.Fatal(err)
	}
	if s := me(tok); s != 401 {
		t.Fatalf("token of inactive client: %d", s)
	}
	if s := tokenStatus(id, newSec); s != 401 {
		t.Fatalf("issuance for inactive client: %d", s)
	}
	act, err := h.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: id, MemberId: admin}))
	if err != nil || act.Msg.GetClient().GetStatus() != "active" {
		t.Fatalf("activate: %v %v", act, err)
	}
	if s := me(tok); s != 200 {
		t.Fatalf("token after activation: %d", s)
	}

	// List shows the client, never a secret.
	list, err := h.AdminClient.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: ws, MemberId: admin}))
	if err != nil || len(list.Msg.GetClients()) != 1 || list.Msg.GetClients()[0].GetClientId() != id {
		t.Fatalf("list = %v, %v", list, err)
	}
	// The same list as plain Connect JSON, to read the bytes on the wire.
	// It must be answered: a refusal's body would pass the check vacuously.
	raw, err := h.Admin.Client().Post(h.Admin.URL+"/partner.admin.v1.AdminService/ListApiClients", "application/json",
		strings.NewReader(`{"workspaceId":"`+ws+`","memberId":"`+admin+`"}`))
	if err != nil || raw.StatusCode != 200 {
		t.Fatalf("list as Connect JSON: %v %v", raw, err)
	}
	buf := make([]byte, 1<<16)
	n, _ := raw.Body.Read(buf)
	raw.Body.Close()
	if strings.Contains(string(buf[:n]), newSec) || strings.Contains(strings.ToLower(string(buf[:n])), "secret\"") {
		t.Fatalf("list leaks a secret: %s", buf[:n])
	}

	// Revoke: final.
	if _, err := h.AdminClient.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: id, MemberId: admin})); err != nil {
		t.Fatal(err)
	}
	if s := me(tok); s != 401 {
		t.Fatalf("token of revoked client: %d", s)
	}
	if s := tokenStatus(id, newSec); s != 401 {
		t.Fatalf("issuance for revoked client: %d", s)
	}
	_, err = h.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: id, MemberId: admin}))
	servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, "failed_precondition")
	_, err = h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: id, MemberId: admin}))
	servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, "failed_precondition")
	if s := me(tok); s != 401 {
		t.Fatalf("token of revoked client after refused activation: %d", s)
	}

	// Audit log: every action with its actor, newest first; the two
	// changes the revoked client refused are there as refused.
	ev, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: admin}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range ev.Msg.GetEvents() {
		got = append(got, e.GetAction())
		if refused := i < 2; refused != (e.GetOutcome() == "refused") || refused != (e.GetReason() == "client_revoked") ||
			!refused && e.GetOutcome() != "succeeded" {
			t.Errorf("event %d %v: outcome %q, reason %q", i, e.GetAction(), e.GetOutcome(), e.GetReason())
		}
		if !strings.HasPrefix(e.GetAction(), "api_client.") {
			// The operator's bootstrap actions have no acting member.
			if e.GetActorMemberId() != "" || e.GetClientId() != "" {
				t.Errorf("operator event %v = %v", e.GetAction(), e)
			}
			if e.GetAction() == "member.add" && e.GetMemberId() != admin {
				t.Errorf("member.add names member %q, want %q", e.GetMemberId(), admin)
			}
			continue
		}
		if e.GetActorMemberId() != admin {
			t.Errorf("event %v has actor %q", e.GetAction(), e.GetActorMemberId())
		}
		if e.GetAction() != "api_client.list" && e.GetClientId() != id {
			t.Errorf("event %v names client %q", e.GetAction(), e.GetClientId())
		}
	}
	want := "api_client.rotate_secret api_client.activate api_client.revoke api_client.list api_client.list api_client.activate api_client.deactivate api_client.rotate_secret api_client.create member.add workspace.create"
	if strings.Join(got, " ") != want {
		t.Fatalf("audit = %v, want %v", got, want)
	}
}
