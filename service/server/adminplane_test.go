package server_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// TestAdminAddrNeedsATokenUnlessLoopback: an admin listener anyone can
// reach is refused without an admin token, with a message saying why.
func TestAdminAddrNeedsATokenUnlessLoopback(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:8081", "localhost:0", "[::1]:8081"} {
		if err := server.CheckAdminAddr(addr, ""); err != nil {
			t.Errorf("%s without a token: %v", addr, err)
		}
	}
	for _, addr := range []string{":8081", "0.0.0.0:8081", "[::]:8081", "192.0.2.10:8081"} {
		err := server.CheckAdminAddr(addr, "")
		if err == nil || !strings.Contains(err.Error(), "PARTNER_ADMIN_TOKEN") || !strings.Contains(err.Error(), "not loopback") {
			t.Errorf("%s without a token: %v", addr, err)
		}
		if err := server.CheckAdminAddr(addr, "a-token"); err != nil {
			t.Errorf("%s with a token: %v", addr, err)
		}
	}
}

// TestPprofNeedsTheTokenOrAnOptIn: profiles are served behind the admin
// token, or without one only when the operator opted in.
func TestPprofNeedsTheTokenOrAnOptIn(t *testing.T) {
	t.Parallel()
	get := func(h *servertest.Harness, token string) int {
		req, _ := http.NewRequest(http.MethodGet, h.Admin.URL+"/debug/pprof/", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	plain := servertest.New(t)
	if s := get(plain, ""); s != 404 {
		t.Errorf("no token, no opt-in: %d, want 404", s)
	}
	optIn := servertest.New(t, servertest.Options{DB: plain.DB, Config: func(c *server.Config) { c.Pprof = true }})
	if s := get(optIn, ""); s != 200 {
		t.Errorf("opt-in: %d, want 200", s)
	}
	guarded := servertest.New(t, servertest.Options{DB: plain.DB, AdminToken: "pprof-token"})
	if s := get(guarded, ""); s != 401 {
		t.Errorf("token set, none sent: %d, want 401", s)
	}
	if s := get(guarded, "pprof-token"); s != 200 {
		t.Errorf("token sent: %d, want 200", s)
	}
}

// TestAdminTokenGuardsEveryAdminRequest: with a token set, Connect, REST
// and reflection on the admin listener need it, whatever its length, and
// it is checked before the body is read.
func TestAdminTokenGuardsEveryAdminRequest(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, servertest.Options{AdminToken: "the-admin-token"})
	for _, token := range []string{"", "t", "the-admin-toke", "the-admin-token-and-more", strings.Repeat("x", 4096)} {
		req := connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "x"})
		if token != "" {
			req.Header().Set("Authorization", "Bearer "+token)
		}
		_, err := h.AdminClientWithoutToken().CreateWorkspace(context.Background(), req)
		assertConnectError(t, err, connect.CodeUnauthenticated, "unauthenticated")
	}
	// REST, with a body over the cap that is never read.
	req, _ := http.NewRequest(http.MethodPost, h.Admin.URL+"/admin/v1/workspaces", bytes.NewReader(make([]byte, 4<<20)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 || res.Header.Get("WWW-Authenticate") != `Bearer realm="partner-admin"` {
		t.Fatalf("REST without the token: %d %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
	// With the token, an oversized body is a 413.
	req, _ = http.NewRequest(http.MethodPost, h.Admin.URL+"/partner.admin.v1.AdminService/CreateWorkspace",
		strings.NewReader(`{"name":"`+strings.Repeat("x", 2<<20)+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Authorization", "Bearer the-admin-token")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 413 {
		t.Fatalf("oversized admin body: %d", res.StatusCode)
	}
	if s, _, _ := h.Do(http.MethodGet, "/healthz", "", "", ""); s != 200 {
		t.Fatalf("public healthz: %d", s)
	}
	hres, err := http.Get(h.Admin.URL + "/healthz")
	if err != nil || hres.StatusCode != 200 {
		t.Fatalf("admin healthz needs no token: %v %v", hres, err)
	}
	hres.Body.Close()
}
