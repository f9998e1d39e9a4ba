// Package servertest runs the whole service for tests: a fresh database,
// the real handlers on httptest listeners (public with cleartext HTTP/2 for
// gRPC, and admin), an injectable clock, and fixtures made through the
// real admin API.
package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/sealed"
	"github.com/svat/partnerapi/internal/security/secret"
	"github.com/svat/partnerapi/service/server"
)

// Clock is a settable clock.
type Clock struct {
	mu  sync.Mutex
	off time.Duration
}

// Now is the real time plus the offset.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// CountingStore counts token lookups that reach the database.
type CountingStore struct {
	Inner auth.Store
	Calls atomic.Int64
}

// LookupToken implements auth.Store.
func (s *CountingStore) LookupToken(ctx context.Context, h secret.Hash) (auth.Record, error) {
	s.Calls.Add(1)
	return s.Inner.LookupToken(ctx, h)
}

// Options tune the harness.
type Options struct {
	AdminToken string
	// DB reuses a database (to run two replicas on one database).
	DB *db.DB
	// Config adjusts the server config before it is built.
	Config func(*server.Config)
}

// SecretKeys seal the webhook secrets of every test server: one fixed key,
// so that a test can open what a server sealed.
var SecretKeys = func() *sealed.Keyring {
	k, err := sealed.Parse("dGVzdCBrZXkgb2YgdGhlIHBhcnRuZXJhcGkgdGVzdHM=")
	if err != nil {
		panic(err)
	}
	return k
}()

// Harness is a running service.
type Harness struct {
	T      testing.TB
	DB     *db.DB
	Server *server.Server
	Public *httptest.Server
	Admin  *httptest.Server
	// AdminClient talks Connect to the admin listener, with the admin token.
	AdminClient adminv1connect.AdminServiceClient
	Clock       *Clock
	// Lookups counts token lookups that reach the store below any cache.
	Lookups *CountingStore
}

// New starts a harness; it stops when t ends.
func New(t testing.TB, opts ...Options) *Harness {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	d := o.DB
	if d == nil {
		d = dbtest.New(t)
	}
	h := &Harness{T: t, DB: d, Clock: &Clock{}}
	h.Lookups = &CountingStore{Inner: auth.DBStore{DB: d}}
	// The server's errors are kept, and shown when the test fails: a
	// failure that answered 500 then says why (the answer never does).
	errLog := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			if b := errLog.String(); b != "" {
				t.Logf("the server's errors:\n%s", b)
			}
		}
	})
	cfg := server.Config{
		DB: d, Log: slog.New(slog.NewTextHandler(errLog, &slog.HandlerOptions{Level: slog.LevelError})), Now: h.Clock.Now,
		AdminToken: o.AdminToken, TokenStore: h.Lookups, SecretKeys: SecretKeys,
	}
	// Generous, like dbtest's bounds: the database's own timeouts are what
	// the fault tests exercise.
	cfg.RequestTimeout = 10 * time.Second
	if o.Config != nil {
		o.Config(&cfg)
	}
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("build server: %v", err)
	}
	h.Server = srv
	h.Public = httptest.NewUnstartedServer(srv.Public)
	h.Public.Config = server.NewHTTPServer(srv.Public, cfg.Log)
	h.Public.Start()
	t.Cleanup(h.Public.Close)
	h.Admin = httptest.NewUnstartedServer(srv.Admin)
	h.Admin.Config = server.NewHTTPServer(srv.Admin, cfg.Log)
	h.Admin.Start()
	t.Cleanup(h.Admin.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if srv.Cache != nil {
		dbtest.Eventually(t, 10*time.Second, "the token cache listener to connect", srv.Cache.Live)
	}
	h.AdminClient = adminv1connect.NewAdminServiceClient(h.Admin.Client(), h.Admin.URL,
		connect.WithInterceptors(bearer(o.AdminToken)))
	return h
}

func bearer(token string) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if token != "" {
				req.Header().Set("Authorization", "Bearer "+token)
			}
			return next(ctx, req)
		}
	})
}

// HTTP2Client speaks cleartext HTTP/2 (prior knowledge), as gRPC needs.
func (h *Harness) HTTP2Client() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// Workspace creates a workspace with an approved member who has settings
// access.
func (h *Harness) Workspace(name string) (workspaceID, memberID string) {
	h.T.Helper()
	ctx := context.Background()
	ws, err := h.AdminClient.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: name}))
	if err != nil {
		h.T.Fatalf("create workspace: %v", err)
	}
	m, err := h.AdminClient.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{
		WorkspaceId: ws.Msg.GetId(), Email: "admin@" + strings.ToLower(strings.ReplaceAll(name, " ", "-")) + ".test", SettingsAccess: true,
	}))
	if err != nil {
		h.T.Fatalf("add member: %v", err)
	}
	return ws.Msg.GetId(), m.Msg.GetId()
}

// Client creates an API client with the given scopes.
func (h *Harness) Client(workspaceID, memberID string, scopes ...string) (clientID, clientSecret string) {
	h.T.Helper()
	res, err := h.AdminClient.CreateApiClient(context.Background(), connect.NewRequest(&adminv1.CreateApiClientRequest{
		WorkspaceId: workspaceID, MemberId: memberID, Name: "test client", Scopes: scopes,
	}))
	if err != nil {
		h.T.Fatalf("create api client: %v", err)
	}
	return res.Msg.GetClientId(), res.Msg.GetClientSecret()
}

// Token gets an access token over REST with HTTP Basic.
func (h *Harness) Token(clientID, clientSecret, scope string) string {
	h.T.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	req, _ := http.NewRequest(http.MethodPost, h.Public.URL+"/api/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(clientSecret))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.T.Fatalf("token request: %v", err)
	}
	defer res.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&body) != nil || body.AccessToken == "" {
		h.T.Fatalf("token request: status %d", res.StatusCode)
	}
	return body.AccessToken
}

// Tenant is a workspace with a client that has every scope, and its token.
type Tenant struct {
	WorkspaceID, MemberID, ClientID, ClientSecret, Token string
}

// NewTenant creates a workspace, a member, an all-scope client and a token.
func (h *Harness) NewTenant(name string) Tenant {
	h.T.Helper()
	ws, m := h.Workspace(name)
	id, sec := h.Client(ws, m, "contacts:read", "contacts:write", "leads:read", "leads:write", "apps:read")
	return Tenant{WorkspaceID: ws, MemberID: m, ClientID: id, ClientSecret: sec, Token: h.Token(id, sec, "")}
}

// Do sends a REST request and returns status, headers and body. It fails
// the test on a transport error, so call it only from the test's own
// goroutine; spawned goroutines use [Harness.Send].
func (h *Harness) Do(method, path, token, contentType, body string, headers ...string) (int, http.Header, []byte) {
	h.T.Helper()
	status, hdr, b, err := h.Send(method, path, token, contentType, body, headers...)
	if err != nil {
		h.T.Fatal(err)
	}
	return status, hdr, b
}

// Send is [Harness.Do] returning the transport error instead of failing
// the test, for goroutines a test spawns (testing forbids t.Fatal there).
func (h *Harness) Send(method, path, token, contentType, body string, headers ...string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(method, h.Public.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read %s %s: %w", method, path, err)
	}
	return res.StatusCode, res.Header, b, nil
}

// FastClient creates an API client whose own read and write rates are far
// above anything a test sends, for tests that measure something other
// than the rate limits (races, fuzzing).
func (h *Harness) FastClient(workspaceID, memberID string, scopes ...string) (clientID, clientSecret string) {
	h.T.Helper()
	return h.ClientWithRates(workspaceID, memberID, 1_000_000, 1_000_000, scopes...)
}

// ClientWithRates creates an API client with its own read and write rates
// (requests per second; 0 keeps the server default).
func (h *Harness) ClientWithRates(workspaceID, memberID string, read, write int32, scopes ...string) (clientID, clientSecret string) {
	h.T.Helper()
	req := &adminv1.CreateApiClientRequest{WorkspaceId: workspaceID, MemberId: memberID, Name: "test client", Scopes: scopes}
	if read != 0 {
		req.ReadRate = &read
	}
	if write != 0 {
		req.WriteRate = &write
	}
	res, err := h.AdminClient.CreateApiClient(context.Background(), connect.NewRequest(req))
	if err != nil {
		h.T.Fatalf("create api client: %v", err)
	}
	return res.Msg.GetClientId(), res.Msg.GetClientSecret()
}

// NewFastTenant is NewTenant with a FastClient.
func (h *Harness) NewFastTenant(name string) Tenant {
	h.T.Helper()
	ws, m := h.Workspace(name)
	id, sec := h.FastClient(ws, m, "contacts:read", "contacts:write", "leads:read", "leads:write", "apps:read")
	return Tenant{WorkspaceID: ws, MemberID: m, ClientID: id, ClientSecret: sec, Token: h.Token(id, sec, "")}
}

// lockedBuffer is a log's destination shared by a server's goroutines,
// bounded: past 64 KiB it keeps only what came first.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 64<<10 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
