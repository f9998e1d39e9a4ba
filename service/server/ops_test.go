package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// TestHealthAndReadiness: /healthz, /readyz and the gRPC health service.
func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		if s, _, b := h.Do(http.MethodGet, p, "", "", ""); s != 200 || strings.TrimSpace(string(b)) != "ok" {
			t.Errorf("%s: %d %s", p, s, b)
		}
	}
	s, _, b := h.Do(http.MethodPost, "/grpc.health.v1.Health/Check", "", "application/json",
		`{"service":"partner.lead.v1.LeadService"}`, "Connect-Protocol-Version", "1")
	if s != 200 || !strings.Contains(string(b), "SERVING") {
		t.Fatalf("grpc health: %d %s", s, b)
	}
	// Readiness follows the database.
	h.DB.Close()
	if s, _, _ := h.Do(http.MethodGet, "/readyz", "", "", ""); s != 503 {
		t.Errorf("/readyz with the database gone: %d", s)
	}
	if s, _, _ := h.Do(http.MethodGet, "/healthz", "", "", ""); s != 200 {
		t.Errorf("/healthz with the database gone: %d", s)
	}
}

// TestLastUsedIsBatched: requests mark the client in memory; one flush
// writes last_used_at.
func TestLastUsedIsBatched(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	tn := h.NewTenant("Usage Co")
	for range 20 {
		if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 200 {
			t.Fatal(s)
		}
	}
	list := func() *adminv1.ApiClient {
		res, err := h.AdminClient.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: tn.WorkspaceID, MemberId: tn.MemberID}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetClients()[0]
	}
	if c := list(); c.GetLastUsedAt() != nil {
		t.Fatalf("last_used_at written per request: %v", c.GetLastUsedAt())
	}
	if err := h.Server.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if c := list(); c.GetLastUsedAt() == nil {
		t.Fatal("last_used_at not written by the flush")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNoSecretIsLogged drives successes and failures, including a store
// failure that logs at error level, and checks the log holds no secret or
// token.
func TestNoSecretIsLogged(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) {
		c.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	ws, m := h.Workspace("Logs Co")
	id, sec := h.Client(ws, m, "contacts:read")
	tok := h.Token(id, sec, "")
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode()
	h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", form)
	h.Do(http.MethodGet, "/api/v1/me", tok, "", "")
	h.Do(http.MethodGet, "/api/v1/contacts?access_token="+tok, "", "", "")
	h.Do(http.MethodPost, "/api/oauth/revoke", "", "application/x-www-form-urlencoded", url.Values{"token": {tok}, "client_id": {id}, "client_secret": {"wrong"}}.Encode())
	h.DB.Close()
	if s, _, _ := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", form); s != 500 {
		t.Fatalf("store failure: %d", s)
	}
	out := logs.String()
	if !strings.Contains(out, "request failed") {
		t.Fatalf("the store failure was not logged; log:\n%s", out)
	}
	for name, s := range map[string]string{"client secret": sec, "access token": tok} {
		if strings.Contains(out, s) {
			t.Errorf("the log contains the %s", name)
		}
	}
}

// TestReflection: the public listener answers gRPC server reflection, so
// `buf curl --list-methods` needs no schema.
func TestReflection(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := grpcreflect.NewClient(h.HTTP2Client(), h.Public.URL)
	stream := c.NewStream(context.Background())
	defer stream.Close()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, n := range names {
		got[string(n)] = true
	}
	for _, want := range []string{"partner.token.v1.TokenService", "partner.identity.v1.IdentityService",
		"partner.contact.v1.ContactService", "partner.lead.v1.LeadService"} {
		if !got[want] {
			t.Errorf("reflection does not list %s (got %v)", want, names)
		}
	}
	files, err := stream.FileContainingSymbol("partner.lead.v1.LeadService")
	if err != nil || len(files) == 0 {
		t.Fatalf("FileContainingSymbol: %v %v", files, err)
	}
}
