package settings_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/edge/apierror"
	"github.com/svat/partnerapi/service/admin"
	"github.com/svat/partnerapi/service/servertest"
	"github.com/svat/partnerapi/service/settings"
)

// endpoints is a Webhooks source held in memory, standing in for the
// webhooks service until it lands.
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

// TestWebhookEndpointsSlotIn: with a Webhooks source, each client's page
// lists its endpoints with "Disable", which calls the source as the
// signed-in member; without one (the server today), the section is not
// there.
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

	// The server's page has no such section.
	b := newBrowser(t, h)
	b.do("GET", signInLink(t, h, member, 0), nil)
	if _, html := b.do("GET", "/settings/clients/"+clientID, nil); strings.Contains(html, "Webhook endpoints") {
		t.Fatal("a page without a webhooks source shows webhook endpoints")
	}

	res, err := h.AdminClient.CreateSignInLink(context.Background(), connect.NewRequest(&adminv1.CreateSignInLinkRequest{MemberId: member}))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(res.Msg.GetUrl())
	w := newBrowser(t, h)
	w.base = srv.URL
	w.do("GET", srv.URL+u.RequestURI(), nil)
	_, html := w.do("GET", "/settings/clients/"+clientID, nil)
	if !strings.Contains(html, `<h2 id="webhooks">Webhook endpoints</h2>`) || !strings.Contains(html, "https://hooks.example.com/partner") ||
		!strings.Contains(html, ">Disable</button>") {
		t.Fatalf("the client's page lacks its webhook endpoints:\n%s", html)
	}
	r, _ := w.do("POST", "/settings/clients/"+clientID+"/webhooks/whe_1/disable", url.Values{"csrf": {csrf(t, html)}}, "Sec-Fetch-Site", "same-origin")
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("Disable: status %d, want 303", r.StatusCode)
	}
	_, html = w.do("GET", r.Header.Get("Location"), nil)
	if strings.Contains(html, ">Disable</button>") || !strings.Contains(html, "The webhook endpoint is disabled.") {
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
	_, first := b.do("GET", "/settings/audit", nil)
	if strings.Count(first, "<tr>") != 51 || !strings.Contains(first, ">Older events</a>") || strings.Contains(first, "Newest events") {
		t.Fatalf("first page: %d rows\n%s", strings.Count(first, "<tr>")-1, first)
	}
	next := strings.Split(strings.Split(first, `<a href="/settings/audit?page=`)[1], `"`)[0]
	_, second := b.do("GET", "/settings/audit?page="+next, nil)
	if !strings.Contains(second, ">Newest events</a>") || !strings.Contains(second, "workspace.create") || strings.Contains(second, "Older events") {
		t.Fatalf("second page:\n%s", second)
	}
	// Newest first: the first page starts with the sign-in (the read
	// itself is audited after the page is read).
	if i, j := strings.Index(first, "settings.sign_in"), strings.Index(first, "api_client.list"); i < 0 || i > j {
		t.Fatal("the first page does not start with the newest event")
	}
}
