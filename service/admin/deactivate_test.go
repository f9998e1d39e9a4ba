package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/service/servertest"
)

// TestDeactivateWithRevokeTokensEndsTokensForGood: deactivate with
// revoke_tokens (`client deactivate --revoke-tokens`) ends every token of
// the client: after a later activate, the old tokens answer 401 on every
// replica, one that had them cached included, while a new token from the
// unchanged secret works. It is audited as api_client.deactivate and
// api_client.revoke_tokens. Before, deactivation was the only lever short
// of revoking the client or rotating its secret, and activation brought a
// leaked token back.
func TestDeactivateWithRevokeTokensEndsTokensForGood(t *testing.T) {
	t.Parallel()
	a := servertest.New(t)
	b := servertest.New(t, servertest.Options{DB: a.DB})
	ctx := context.Background()
	ws, m := a.Workspace("Leaked Token Co")
	id, sec := a.Client(ws, m, "contacts:read")
	me := func(h *servertest.Harness, tok string) int {
		s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tok, "", "")
		return s
	}
	old := []string{a.Token(id, sec, ""), b.Token(id, sec, "")}
	for _, tok := range old {
		// Twice on B: the second answer comes from its cache.
		if me(a, tok) != 200 || me(b, tok) != 200 || me(b, tok) != 200 {
			t.Fatal("a fresh token is refused")
		}
	}

	res, err := a.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: m, RevokeTokens: true}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetClient().GetStatus() != "inactive" {
		t.Fatalf("deactivate --revoke-tokens answered %v", res.Msg.GetClient())
	}
	if _, err := a.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: id, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	for i, tok := range old {
		if sa, sb := me(a, tok), me(b, tok); sa != 401 || sb != 401 {
			t.Errorf("old token %d after deactivate --revoke-tokens and activate: %d on A, %d on B; want 401", i, sa, sb)
		}
	}
	fresh := b.Token(id, sec, "")
	if sa, sb := me(a, fresh), me(b, fresh); sa != 200 || sb != 200 {
		t.Fatalf("a new token after activation: %d on A, %d on B", sa, sb)
	}

	events := auditLog(t, a, ws, m)
	var got []string
	for _, e := range events[:3] {
		got = append(got, e.GetAction())
		if e.GetOutcome() != "succeeded" || e.GetActorMemberId() != m || e.GetClientId() != id {
			t.Errorf("audit event %v", e)
		}
	}
	if want := "api_client.activate api_client.revoke_tokens api_client.deactivate"; strings.Join(got, " ") != want {
		t.Fatalf("audit = %v, want %s", got, want)
	}
}

// TestPlainDeactivateOnlySuspendsTokens: deactivate without revoke_tokens
// is the documented pause (product.md: "deactivate is reversible"): the
// client's tokens are refused while it is inactive, on every replica, and
// work again once it is activated. The CLI help and the docs say so, and
// point to --revoke-tokens, rotate-secret and revoke to end them.
func TestPlainDeactivateOnlySuspendsTokens(t *testing.T) {
	t.Parallel()
	a := servertest.New(t)
	b := servertest.New(t, servertest.Options{DB: a.DB})
	ctx := context.Background()
	ws, m := a.Workspace("Paused Co")
	id, sec := a.Client(ws, m, "contacts:read")
	tok := a.Token(id, sec, "")
	me := func(h *servertest.Harness) int {
		s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tok, "", "")
		return s
	}
	// Twice on B: the second answer comes from its cache.
	for range 2 {
		if s := me(b); s != 200 {
			t.Fatalf("a fresh token on B: %d", s)
		}
	}
	if _, err := a.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	if sa, sb := me(a), me(b); sa != 401 || sb != 401 {
		t.Fatalf("token of an inactive client: %d on A, %d on B; want 401", sa, sb)
	}
	if _, err := a.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: id, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	if sa, sb := me(a), me(b); sa != 200 || sb != 200 {
		t.Fatalf("token after a plain deactivate and activate: %d on A, %d on B; want 200 (a pause)", sa, sb)
	}
	for _, e := range auditLog(t, a, ws, m) {
		if e.GetAction() == "api_client.revoke_tokens" {
			t.Fatalf("a plain deactivation is audited as revoking tokens: %v", e)
		}
	}
}
