package server_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
)

// TestDeactivateRevokeTokensRaceLeavesNoToken: tokens issued while
// deactivate --revoke-tokens commits (their batched INSERT may land after
// the revocation's UPDATE) stay refused after the client is activated
// again: the deactivation moves the client's secret generation on, as a
// rotation does, so no token minted before it is current.
func TestDeactivateRevokeTokensRaceLeavesNoToken(t *testing.T) {
	t.Parallel()
	h := raceHarness(t)
	ctx := context.Background()
	ws, m := h.Workspace("Race Revoke Tokens Co")
	issued, surviving := 0, 0
	for round := range 4 {
		id, sec := h.FastClient(ws, m, "contacts:read")
		is := &issuer{h: h, id: id, sec: sec}
		is.race(func() {
			if _, err := h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: m, RevokeTokens: true})); err != nil {
				t.Errorf("round %d: deactivate --revoke-tokens: %v", round, err)
			}
		})
		if len(is.failures) > 0 {
			t.Fatalf("round %d: unexpected answers: %v", round, is.failures[:min(5, len(is.failures))])
		}
		if _, err := h.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: id, MemberId: m})); err != nil {
			t.Fatal(err)
		}
		issued += len(is.tokens)
		surviving += is.survivors(t)
		if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", h.Token(id, sec, ""), "", ""); s != 200 {
			t.Fatalf("round %d: a new token after activation: %d", round, s)
		}
	}
	if surviving > 0 {
		t.Fatalf("%d of %d tokens answer 200 after deactivate --revoke-tokens and activate", surviving, issued)
	}
	if issued == 0 {
		t.Fatal("no token was issued during the races; the test proves nothing")
	}
}
