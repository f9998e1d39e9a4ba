package admin_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/service/admin"
	"github.com/svat/partnerapi/service/servertest"
)

// countingSyncer counts the token-cache syncs the service asks for.
type countingSyncer struct{ n atomic.Int64 }

func (c *countingSyncer) Sync(context.Context) { c.n.Add(1) }

// unit is the admin service on a database of its own, without the server
// around it, with a workspace, a member who may manage clients and a
// client.
type unit struct {
	svc             *admin.Service
	sync            *countingSyncer
	ws, member, cli string
}

func newUnit(t *testing.T) unit {
	t.Helper()
	ctx := context.Background()
	u := unit{sync: &countingSyncer{}}
	u.svc = &admin.Service{DB: dbtest.New(t), Sync: u.sync}
	ws, err := u.svc.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "Unit Co"}))
	if err != nil {
		t.Fatal(err)
	}
	m, err := u.svc.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: ws.Msg.GetId(), Email: "owner@unit.test", SettingsAccess: true}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := u.svc.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{
		WorkspaceId: ws.Msg.GetId(), MemberId: m.Msg.GetId(), Name: "Unit client", Scopes: []string{"leads:write", "contacts:read"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	u.ws, u.member, u.cli = ws.Msg.GetId(), m.Msg.GetId(), c.Msg.GetClientId()
	return u
}

// actions lists the workspace's audit log, oldest first.
func (u unit) actions(t *testing.T) []string {
	t.Helper()
	res, err := u.svc.ListAuditEvents(context.Background(), connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: u.ws, MemberId: u.member}))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range res.Msg.GetEvents() {
		out = append(out, e.GetAction()+"/"+e.GetOutcome())
	}
	slices.Reverse(out)
	return out
}

// TestServiceBootstrapIsAudited: the operator's bootstrap and the first
// client are in the audit log in order, the read of the log too, and no
// list answers a client's secret.
func TestServiceBootstrapIsAudited(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	want := []string{admin.ActionWorkspaceCreate, admin.ActionMemberAdd, admin.ActionCreate}
	got := u.actions(t)
	if len(got) != len(want) {
		t.Fatalf("audit log %v, want %v", got, want)
	}
	for i, a := range want {
		if got[i] != a+"/"+admin.OutcomeSucceeded {
			t.Errorf("event %d = %s, want %s succeeded", i, got[i], a)
		}
	}
	if again := u.actions(t); len(again) != len(want)+1 || again[len(want)] != admin.ActionAuditList+"/"+admin.OutcomeSucceeded {
		t.Errorf("after a read of the log: %v, want the read audited", again)
	}
	list, err := u.svc.ListApiClients(context.Background(), connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: u.ws, MemberId: u.member}))
	if err != nil || len(list.Msg.GetClients()) != 1 {
		t.Fatalf("ListApiClients: %v %v", list, err)
	}
	c := list.Msg.GetClients()[0]
	if c.GetClientId() != u.cli || c.GetStatus() != admin.StatusActive || !slices.Equal(c.GetScopes(), []string{"contacts:read", "leads:write"}) && !slices.Equal(c.GetScopes(), []string{"leads:write", "contacts:read"}) {
		t.Errorf("listed client %v", c)
	}
}

// TestServiceRatesRules: 1 to MaxRate sets a rate, 0 clears it, an absent
// one is kept; below 0, above MaxRate or neither sent is refused and
// changes nothing.
func TestServiceRatesRules(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	ctx := context.Background()
	set := func(read, write *int32) (*adminv1.ApiClient, error) {
		res, err := u.svc.SetApiClientRates(ctx, connect.NewRequest(&adminv1.SetApiClientRatesRequest{ClientId: u.cli, MemberId: u.member, ReadRate: read, WriteRate: write}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetClient(), nil
	}
	c, err := set(servertest.Ptr[int32](admin.MaxRate), servertest.Ptr[int32](7))
	if err != nil || c.GetReadRate() != admin.MaxRate || c.GetWriteRate() != 7 {
		t.Fatalf("set both: %v %v", c, err)
	}
	if c, err = set(nil, servertest.Ptr[int32](0)); err != nil || c.GetReadRate() != admin.MaxRate || c.WriteRate != nil {
		t.Fatalf("clear write, keep read: %v %v", c, err)
	}
	for name, r := range map[string][2]*int32{
		"negative read":  {servertest.Ptr[int32](-1), nil},
		"too high write": {nil, servertest.Ptr[int32](admin.MaxRate + 1)},
		"neither":        {nil, nil},
	} {
		_, err := set(r[0], r[1])
		if e := servertest.APIError(t, err); e.Code != apierror.CodeValidationFailed || len(e.Fields) != 1 {
			t.Errorf("%s: %+v, want one violation", name, e)
		}
	}
	if c, err = set(nil, servertest.Ptr[int32](3)); err != nil || c.GetReadRate() != admin.MaxRate || c.GetWriteRate() != 3 {
		t.Errorf("after refusals: %v %v, want the read rate kept", c, err)
	}
}

// TestServiceRevocationIsFinalAndSyncsCaches: every change that commits
// asks the token caches to catch up before it answers; a revoked client
// cannot be activated, deactivated or rotated, and a second revoke
// changes nothing.
func TestServiceRevocationIsFinalAndSyncsCaches(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	ctx := context.Background()
	before := u.sync.n.Load()
	if _, err := u.svc.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: u.cli, MemberId: u.member, RevokeTokens: true})); err != nil {
		t.Fatal(err)
	}
	if n := u.sync.n.Load() - before; n != 1 {
		t.Errorf("%d syncs after deactivate --revoke-tokens, want 1", n)
	}
	for i := range 2 {
		res, err := u.svc.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: u.cli, MemberId: u.member}))
		if err != nil || res.Msg.GetClient().GetStatus() != admin.StatusRevoked || res.Msg.GetClient().GetRevokedAt() == nil {
			t.Fatalf("revoke %d: %v %v", i+1, res, err)
		}
	}
	synced := u.sync.n.Load()
	for name, call := range map[string]func() error{
		"activate": func() error {
			_, err := u.svc.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: u.cli, MemberId: u.member}))
			return err
		},
		"deactivate": func() error {
			_, err := u.svc.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: u.cli, MemberId: u.member}))
			return err
		},
		"rotate": func() error {
			_, err := u.svc.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: u.cli, MemberId: u.member}))
			return err
		},
	} {
		if e := servertest.APIError(t, call()); e.Code != apierror.CodeFailedPrecondition {
			t.Errorf("%s a revoked client: %+v, want failed_precondition", name, e)
		}
	}
	if n := u.sync.n.Load(); n != synced {
		t.Errorf("%d syncs after refused changes, want none", n-synced)
	}
	got := u.actions(t)
	if refused := admin.ActionActivate + "/" + admin.OutcomeRefused; !slices.Contains(got, refused) {
		t.Errorf("audit log %v has no %s", got, refused)
	}
}

// TestServiceRefusesMembersWhoMayNotManage: a pending member, one
// without settings access and a stranger are refused, and each refusal
// is audited.
func TestServiceRefusesMembersWhoMayNotManage(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	ctx := context.Background()
	add := func(email string, pending, settings bool) string {
		t.Helper()
		m, err := u.svc.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: u.ws, Email: email, Pending: pending, SettingsAccess: settings}))
		if err != nil {
			t.Fatal(err)
		}
		return m.Msg.GetId()
	}
	other, err := u.svc.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "Other Co"}))
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := u.svc.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: other.Msg.GetId(), Email: "s@other.test", SettingsAccess: true}))
	if err != nil {
		t.Fatal(err)
	}
	for name, member := range map[string]string{
		"pending":             add("pending@unit.test", true, true),
		"no settings access":  add("viewer@unit.test", false, false),
		"another workspace's": stranger.Msg.GetId(),
	} {
		_, err := u.svc.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: u.cli, MemberId: member}))
		if e := servertest.APIError(t, err); e.Code != apierror.CodePermissionDenied {
			t.Errorf("%s member: %+v, want permission_denied", name, e)
		}
	}
	refused := 0
	for _, a := range u.actions(t) {
		if a == admin.ActionRevoke+"/"+admin.OutcomeRefused {
			refused++
		}
	}
	if refused != 3 {
		t.Errorf("%d refused revocations audited, want 3", refused)
	}
	_, err = u.svc.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: u.ws, Email: "OWNER@unit.test"}))
	if e := servertest.APIError(t, err); e.Code != apierror.CodeDuplicate {
		t.Errorf("a member's email again: %+v, want duplicate", e)
	}
}
