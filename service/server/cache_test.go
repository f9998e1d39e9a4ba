package server_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/secret"
	"github.com/svat/partnerapi/service/servertest"
)

// TestCachedTokenCheckMakesNoQueries counts store lookups: after the first
// request, a token is checked from memory; an unknown token is remembered
// too.
func TestCachedTokenCheckMakesNoQueries(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Cache Co")
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 200 {
		t.Fatal(s)
	}
	before := h.Lookups.Calls.Load()
	for range 50 {
		if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 200 {
			t.Fatal(s)
		}
	}
	if n := h.Lookups.Calls.Load() - before; n != 0 {
		t.Fatalf("50 cached checks made %d store lookups, want 0", n)
	}
	unknown, _ := secret.NewToken()
	before = h.Lookups.Calls.Load()
	for range 20 {
		if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", unknown, "", ""); s != 401 {
			t.Fatal(s)
		}
	}
	if n := h.Lookups.Calls.Load() - before; n != 1 {
		t.Fatalf("20 checks of one unknown token made %d store lookups, want 1", n)
	}
}

// TestCacheInvalidationAcrossReplicas runs two replicas on one database.
// Replica B holds a token in its cache; every change made through replica
// A is refused or restored by B on the very next request.
func TestCacheInvalidationAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := servertest.New(t)
	b := servertest.New(t, servertest.Options{DB: a.DB})
	ctx := context.Background()
	ws, m := a.Workspace("Replica Co")
	id, sec := a.Client(ws, m, "contacts:read")

	warm := func(tok string) {
		t.Helper()
		if s, _, body := b.Do(http.MethodGet, "/api/v1/me", tok, "", ""); s != 200 {
			t.Fatalf("warming B: %d %s", s, body)
		}
		before := b.Lookups.Calls.Load()
		if s, _, _ := b.Do(http.MethodGet, "/api/v1/me", tok, "", ""); s != 200 {
			t.Fatalf("B: %d", s)
		}
		if b.Lookups.Calls.Load() != before {
			t.Fatal("B's cache does not hold the token")
		}
	}
	onB := func(tok string) int {
		s, _, _ := b.Do(http.MethodGet, "/api/v1/me", tok, "", "")
		return s
	}

	// RFC 7009 revocation on A.
	tok := a.Token(id, sec, "")
	warm(tok)
	s, _, body := a.Do(http.MethodPost, "/api/oauth/revoke", "", "application/x-www-form-urlencoded",
		url.Values{"token": {tok}, "client_id": {id}, "client_secret": {sec}}.Encode())
	if s != 200 {
		t.Fatalf("revoke on A: %d %s", s, body)
	}
	if s := onB(tok); s != 401 {
		t.Fatalf("revoked token on B: %d", s)
	}

	// Deactivation, then activation.
	tok = a.Token(id, sec, "")
	warm(tok)
	if _, err := a.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	if s := onB(tok); s != 401 {
		t.Fatalf("token of a deactivated client on B: %d", s)
	}
	if _, err := a.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: id, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	if s := onB(tok); s != 200 {
		t.Fatalf("token of a re-activated client on B: %d", s)
	}

	// Rotation: B refuses the old tokens and the old secret, although it
	// had the client cached from issuing a token with it.
	warm(tok)
	_ = b.Token(id, sec, "")
	rot, err := a.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: id, MemberId: m}))
	if err != nil {
		t.Fatal(err)
	}
	if s := onB(tok); s != 401 {
		t.Fatalf("token of a rotated client on B: %d", s)
	}
	if s, _, _ := b.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded",
		url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode()); s != 401 {
		t.Fatalf("old secret on B after rotation on A: %d", s)
	}

	// Revocation of the client.
	tok = a.Token(id, rot.Msg.GetClientSecret(), "")
	warm(tok)
	if _, err := a.AdminClient.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: id, MemberId: m})); err != nil {
		t.Fatal(err)
	}
	if s := onB(tok); s != 401 {
		t.Fatalf("token of a revoked client on B: %d", s)
	}
}

// TestCacheOffWhileListenerDown: when the LISTEN connection dies, the cache
// stops answering until it reconnects, and revocations made meanwhile
// still take effect.
func TestCacheOffWhileListenerDown(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Listener Co")
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 200 {
		t.Fatal(s)
	}
	ctx := context.Background()
	// Kill the listener's backend from the server side.
	if _, err := dbtest.Raw(t, h.DB).Exec(ctx, `SELECT pg_terminate_backend($1)`, int32(h.Server.Cache.ListenerPID())); err != nil {
		t.Fatal(err)
	}
	dbtest.Eventually(t, 5*time.Second, "the cache to stop trusting itself once its listener was killed",
		func() bool { return !h.Server.Cache.Live() })
	before := h.Lookups.Calls.Load()
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 200 {
		t.Fatal(s)
	}
	if h.Lookups.Calls.Load() == before && !h.Server.Cache.Live() {
		t.Fatal("a check answered from the cache while the listener was down")
	}
	dbtest.Eventually(t, 10*time.Second, "the listener to reconnect", h.Server.Cache.Live)
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 200 {
		t.Fatal(s)
	}
	s, _, _ := h.Do(http.MethodPost, "/api/oauth/revoke", "", "application/x-www-form-urlencoded",
		url.Values{"token": {tn.Token}, "client_id": {tn.ClientID}, "client_secret": {tn.ClientSecret}}.Encode())
	if s != 200 {
		t.Fatal(s)
	}
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 401 {
		t.Fatalf("revoked token after reconnect: %d", s)
	}
}

var _ auth.Store = (*auth.Cache)(nil)
