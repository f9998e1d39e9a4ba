package settings_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/admin"
	"github.com/svat/partnerapi/service/servertest"
	"github.com/svat/partnerapi/service/settings"
)

// endpoints is a Webhooks source held in memory, to see what the page
// asks of any source.
type endpoints struct {
	mu    sync.Mutex
	calls []string
	list  map[string][]settings.WebhookEndpoint
}

func (e *endpoints) ListEndpoints(_ context.Context, ws, member, client string) ([]settings.WebhookEndpoint, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, "list "+ws+" "+member+" "+client)
	return append([]settings.WebhookEndpoint(nil), e.list[client]...), nil
}

func (e *endpoints) DisableEndpoint(_ context.Context, ws, member, client, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, "disable "+ws+" "+member+" "+client+" "+id)
	for i, ep := range e.list[client] {
		if ep.ID == id {
			e.list[client][i].Disabled, e.list[client][i].Status = true, "disabled"
			return nil
		}
	}
	return apierror.New(apierror.CodeNotFound, "webhook endpoint not found")
}

func (e *endpoints) EnableEndpoint(_ context.Context, ws, member, client, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, "enable "+ws+" "+member+" "+client+" "+id)
	for i, ep := range e.list[client] {
		if ep.ID == id {
			e.list[client][i].Disabled, e.list[client][i].Status = false, "enabled"
			return nil
		}
	}
	return apierror.New(apierror.CodeNotFound, "webhook endpoint not found")
}

// TestWebhookEndpointsSlotIn: with a Webhooks source, each client's page
// lists its endpoints with "Disable", which calls the source as the
// signed-in member; without one, the section is not there.
func TestWebhookEndpointsSlotIn(t *testing.T) {
	h := servertest.New(t)
	ws, member := h.Workspace("Hooks")
	clientID, _ := h.Client(ws, member, "contacts:read")
	src := &endpoints{list: map[string][]settings.WebhookEndpoint{
		clientID: {{ID: "whe_1", URL: "https://hooks.example.com/partner", Status: "enabled"}},
	}}
	page, err := settings.New(settings.Config{DB: h.DB, Admin: &admin.Service{DB: h.DB}, Webhooks: src})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(page)
	defer srv.Close()

	// A page without a source has no such section.
	bare, err := settings.New(settings.Config{DB: h.DB, Admin: &admin.Service{DB: h.DB}})
	if err != nil {
		t.Fatal(err)
	}
	bareSrv := httptest.NewServer(bare)
	defer bareSrv.Close()
	b := newBrowser(t, h)
	b.base = bareSrv.URL
	signIn(t, h, b, member)
	if _, html := b.do("GET", "/settings/clients/"+clientID, nil); strings.Contains(html, "Webhook endpoints") || !strings.Contains(html, "<h1>test client</h1>") {
		t.Fatalf("a page without a webhooks source shows webhook endpoints:\n%s", html)
	}

	w := newBrowser(t, h)
	w.base = srv.URL
	signIn(t, h, w, member)
	_, html := w.do("GET", "/settings/clients/"+clientID, nil)
	if !strings.Contains(html, `<h2 id="webhooks">Webhook endpoints</h2>`) || !strings.Contains(html, "https://hooks.example.com/partner") ||
		!strings.Contains(html, ">Disable</a>") {
		t.Fatalf("the client's page lacks its webhook endpoints:\n%s", html)
	}
	r, _ := w.do("POST", "/settings/clients/"+clientID+"/webhooks/whe_1/disable", url.Values{"csrf": {csrf(t, html)}}, "Sec-Fetch-Site", "same-origin")
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("Disable: status %d, want 303", r.StatusCode)
	}
	_, html = w.do("GET", r.Header.Get("Location"), nil)
	if strings.Contains(html, ">Disable</a>") || !strings.Contains(html, "The webhook endpoint is disabled.") {
		t.Fatalf("after Disable:\n%s", html)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	want := "disable " + ws + " " + member + " " + clientID + " whe_1"
	found := false
	for _, c := range src.calls {
		found = found || c == want
	}
	if !found {
		t.Fatalf("calls %v, want %q (the signed-in member acts)", src.calls, want)
	}
}

// signIn signs the browser in as the member on the page at b.base, with
// a link from the admin API.
func signIn(t *testing.T, h *servertest.Harness, b *browser, member string) {
	t.Helper()
	res, err := h.AdminClient.CreateSignInLink(context.Background(), connect.NewRequest(&adminv1.CreateSignInLinkRequest{MemberId: member}))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(res.Msg.GetUrl())
	if r, _ := b.do("GET", b.base+u.RequestURI(), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: status %d, want 303", r.StatusCode)
	}
}

// TestWebhookEndpointsOnTheServersPage: the server's page lists a client's
// endpoints through the admin service (settings.AdminWebhooks), and its
// "Disable" is DisableWebhookEndpoint's code: the row is disabled with
// reason admin and the audit log has webhook_endpoint.disable by the
// signed-in member, naming the client. An endpoint of another client is
// not disabled from this client's page.
func TestWebhookEndpointsOnTheServersPage(t *testing.T) {
	h := servertest.New(t)
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	ws, member := h.Workspace("Hooks Page")
	clientID, _ := h.Client(ws, member, "leads:read")
	otherClient, _ := h.Client(ws, member, "leads:read")
	wsID, _ := opaqueid.Parse(opaqueid.Workspace, ws)
	seed := func(client, u string) (uuid.UUID, string) {
		cid, _ := opaqueid.Parse(opaqueid.Client, client)
		id := uuid.Must(uuid.NewV7())
		if _, err := raw.Exec(ctx, `INSERT INTO webhook_endpoints
			(workspace_id, id, client_id, url, event_types, secret, after_xid, after_seq)
			VALUES ($1, $2, $3, $4, '{lead.created}', 'whsec_c2VjcmV0LW5ldmVyLXNob3du', 0, 0)`, wsID, id, cid, u); err != nil {
			t.Fatalf("seed webhook endpoint: %v", err)
		}
		return id, opaqueid.Format(opaqueid.Webhook, id)
	}
	id, endpoint := seed(clientID, "https://hooks.example.com/partner")
	otherID, other := seed(otherClient, "https://hooks.example.com/elsewhere")

	b := newBrowser(t, h)
	signIn(t, h, b, member)
	_, html := b.do("GET", "/settings/clients/"+clientID, nil)
	if !strings.Contains(html, `<h2 id="webhooks">Webhook endpoints</h2>`) || !strings.Contains(html, "https://hooks.example.com/partner") ||
		!strings.Contains(html, "/webhooks/"+endpoint+"/disable") || strings.Contains(html, "elsewhere") || strings.Contains(html, "whsec_") {
		t.Fatalf("the client's page lacks its webhook endpoint (or shows another's, or a secret):\n%s", html)
	}
	status := func(id uuid.UUID) (st, reason string) {
		var r *string
		if err := raw.QueryRow(ctx, `SELECT status, disabled_reason FROM webhook_endpoints WHERE id = $1`, id).Scan(&st, &r); err != nil {
			t.Fatal(err)
		}
		if r != nil {
			reason = *r
		}
		return st, reason
	}

	// Another client's endpoint through this client's page: not found.
	r, _ := b.do("POST", "/settings/clients/"+clientID+"/webhooks/"+other+"/disable", url.Values{"csrf": {csrf(t, html)}}, "Sec-Fetch-Site", "same-origin")
	if st, _ := status(otherID); r.StatusCode != http.StatusNotFound || st != "enabled" {
		t.Fatalf("another client's endpoint from this page: status %d, row %s; want 404, enabled", r.StatusCode, st)
	}

	r, _ = b.do("POST", "/settings/clients/"+clientID+"/webhooks/"+endpoint+"/disable", url.Values{"csrf": {csrf(t, html)}}, "Sec-Fetch-Site", "same-origin")
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("Disable: status %d, want 303", r.StatusCode)
	}
	_, html = b.do("GET", r.Header.Get("Location"), nil)
	if strings.Contains(html, ">Disable</a>") || !strings.Contains(html, "The webhook endpoint is disabled.") || !strings.Contains(html, "disabled (admin)") || !strings.Contains(html, ">Enable</button>") {
		t.Fatalf("after Disable:\n%s", html)
	}
	if st, reason := status(id); st != "disabled" || reason != "admin" {
		t.Fatalf("row after Disable: %s %s, want disabled admin", st, reason)
	}
	memberID, _ := opaqueid.Parse(opaqueid.Member, member)
	cid, _ := opaqueid.Parse(opaqueid.Client, clientID)
	var n int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE workspace_id = $1 AND action = 'webhook_endpoint.disable'
		AND actor_member_id = $2 AND client_id = $3 AND outcome = 'succeeded'`, wsID, memberID, cid).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d webhook_endpoint.disable audit events by the member for the client (%v), want 1", n, err)
	}

	// "Enable" undoes it: EnableWebhookEndpoint's code, audited.
	r, _ = b.do("POST", "/settings/clients/"+clientID+"/webhooks/"+endpoint+"/enable", url.Values{"csrf": {csrf(t, html)}}, "Sec-Fetch-Site", "same-origin")
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("Enable: status %d, want 303", r.StatusCode)
	}
	_, html = b.do("GET", r.Header.Get("Location"), nil)
	if !strings.Contains(html, ">Disable</a>") || !strings.Contains(html, "The webhook endpoint is enabled again") || strings.Contains(html, ">Enable</button>") {
		t.Fatalf("after Enable:\n%s", html)
	}
	if st, reason := status(id); st != "enabled" || reason != "" {
		t.Fatalf("row after Enable: %s %s, want enabled", st, reason)
	}
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE workspace_id = $1 AND action = 'webhook_endpoint.enable'
		AND actor_member_id = $2 AND client_id = $3 AND outcome = 'succeeded'`, wsID, memberID, cid).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d webhook_endpoint.enable audit events by the member for the client (%v), want 1", n, err)
	}

	// A revoked client's endpoint cannot be enabled: 409, and it stays
	// disabled.
	if _, err := raw.Exec(ctx, `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'client_revoked' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	_, html = b.do("GET", "/settings/clients/"+clientID, nil)
	if strings.Contains(html, ">Enable</button>") || strings.Contains(html, ">Disable</a>") {
		t.Fatalf("a revoked client's endpoint offers Enable or Disable:\n%s", html)
	}
	r, page := b.do("POST", "/settings/clients/"+clientID+"/webhooks/"+endpoint+"/enable", url.Values{"csrf": {csrf(t, html)}}, "Sec-Fetch-Site", "same-origin")
	if st, _ := status(id); r.StatusCode != http.StatusConflict || !strings.Contains(page, "disabled for good") || st != "disabled" {
		t.Fatalf("Enable of a revoked client's endpoint: status %d, row %s; want 409, disabled\n%s", r.StatusCode, st, page)
	}
}

// TestAuditLogPages: the "Audit log" is newest first, 50 to a page, with
// "Older events" and "Newest events" links.
func TestAuditLogPages(t *testing.T) {
	h := servertest.New(t)
	ws, member := h.Workspace("Pages")
	for range 55 { // each list is an audited read
		clientCount(t, h, ws, member)
	}
	b := newBrowser(t, h)
	b.do("GET", signInLink(t, h, member, 0), nil)
	_, first := b.do("GET", "/settings/audit?kind=all", nil) // the reads too (the default shows the changes)
	if strings.Count(first, "<tr>") != 51 || !strings.Contains(first, ">Older events</a>") || strings.Contains(first, "Newest events") {
		t.Fatalf("first page: %d rows\n%s", strings.Count(first, "<tr>")-1, first)
	}
	next := html.UnescapeString(strings.Split(strings.Split(first, `<a href="/settings/audit?page=`)[1], `"`)[0])
	_, second := b.do("GET", "/settings/audit?page="+next, nil)
	if !strings.Contains(second, ">Newest events</a>") || !strings.Contains(second, "workspace.<wbr>create") || strings.Contains(second, "Older events") {
		t.Fatalf("second page:\n%s", second)
	}
	// Newest first: the first page starts with the sign-in (the read
	// itself is audited after the page is read).
	if i, j := strings.Index(first, "settings.<wbr>sign_<wbr>in"), strings.Index(first, "api_<wbr>client.<wbr>list"); i < 0 || i > j {
		t.Fatal("the first page does not start with the newest event")
	}
}

// TestWebhookEndpointsShowALabels (issue 34, item 5): the page shows an
// endpoint's host as IDNA A-labels (punycode), so that a look-alike
// reads as what it is: one made over the API with a Unicode host is
// stored so, and one stored before that rule is shown so, with the
// characters that do not show (bidirectional controls, invisible ones)
// percent-encoded, as they go on the wire.
func TestWebhookEndpointsShowALabels(t *testing.T) {
	h := servertest.New(t)
	ws, member := h.Workspace("Hooks IDN Page")
	clientID, secret := h.FastClient(ws, member, "leads:read", "webhooks:read", "webhooks:write")
	token := h.Token(clientID, secret, "")
	status, _, body := h.Do("POST", "/api/v1/webhook-endpoints", token, "application/json",
		`{"url":"https://bücher.example/hook","eventTypes":["lead.created"]}`)
	if status != http.StatusCreated {
		t.Fatalf("create: status %d: %s", status, body)
	}
	seedEndpoint(t, h, ws, clientID, "https://пример.example/legacy")
	seedEndpoint(t, h, ws, clientID, "https://example.com/a\u202Eb")

	b := newBrowser(t, h)
	signIn(t, h, b, member)
	_, html := b.do("GET", "/settings/clients/"+clientID, nil)
	for _, want := range []string{"https://xn--bcher-kva.example/hook", "https://xn--e1afmkfd.example/legacy", "https://example.com/a%E2%80%AEb"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page does not show %s", want)
		}
	}
	if strings.Contains(html, "bücher") || strings.Contains(html, "пример") || strings.Contains(html, "\u202E") {
		t.Errorf("the page shows a Unicode host or a bidirectional control:\n%s", html)
	}
}
