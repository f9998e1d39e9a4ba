package settings_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/observe/metrics"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

var signedInAs = regexp.MustCompile(`signed in as ([^<]+)</p>`)

func whoAmI(t *testing.T, b *browser) string {
	t.Helper()
	res, page := b.do("GET", "/settings/", nil)
	m := signedInAs.FindStringSubmatch(page)
	if res.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("clients page: status %d\n%s", res.StatusCode, page)
	}
	return m[1]
}

// TestSignInLinkOfAnotherMemberAsks: a browser signed in as member A that
// opens member B's sign-in link is asked "Continue as <B>?": A's session
// keeps working; a cross-site POST, or one without the form's token, is
// refused; the page's own Continue signs in as B. A's own link just
// continues (issue 34, item 7).
func TestSignInLinkOfAnotherMemberAsks(t *testing.T) {
	h := servertest.New(t)
	_, memberA := h.Workspace("Switch A")
	_, memberB := h.Workspace("Switch B")
	b := newBrowser(t, h)
	if res, _ := b.do("GET", signInLink(t, h, memberA, 0), nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("A's sign-in: status %d", res.StatusCode)
	}
	emailA := whoAmI(t, b)

	// A's own link again: it just continues.
	if res, _ := b.do("GET", signInLink(t, h, memberA, 0), nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("A's own link while signed in as A: status %d, want 303", res.StatusCode)
	}
	if got := whoAmI(t, b); got != emailA {
		t.Fatalf("after A's own link: signed in as %q, want %q", got, emailA)
	}

	// An attacker's page sends the browser to B's link: from another
	// site first (the Strict cookie is not sent), then from the page's
	// own site as its refresh does.
	link := signInLink(t, h, memberB, 0)
	res, page := b.do("GET", link, nil, "Sec-Fetch-Site", "cross-site")
	if res.StatusCode != http.StatusOK || len(res.Cookies()) != 0 {
		t.Fatalf("B's link from another site: status %d, cookies %v\n%s", res.StatusCode, res.Header["Set-Cookie"], page)
	}
	if got := whoAmI(t, b); got != emailA {
		t.Fatalf("after B's link from another site: signed in as %q, want %q", got, emailA)
	}
	res, page = b.do("GET", link, nil, "Sec-Fetch-Site", "same-origin")
	if res.StatusCode != http.StatusOK || len(res.Cookies()) != 0 || !strings.Contains(page, "<h1>Continue as ") ||
		!strings.Contains(page, `<button type="submit">Continue</button>`) || !strings.Contains(page, `>Cancel</a>`) {
		t.Fatalf("B's link while signed in as A: status %d, cookies %v; want the question\n%s", res.StatusCode, res.Header["Set-Cookie"], page)
	}
	assertPageHeaders(t, "question", res, page, "'none'")
	if got := whoAmI(t, b); got != emailA {
		t.Fatalf("after the question: signed in as %q, want %q", got, emailA)
	}
	emailB := strings.TrimSuffix(strings.SplitN(strings.SplitN(page, "<h1>Continue as ", 2)[1], "</h1>", 2)[0], "?")
	if emailB == emailA {
		t.Fatalf("the question names A (%s)", emailA)
	}
	code := strings.SplitN(link, "code=", 2)[1]
	code, _ = url.QueryUnescape(code)
	token := csrf(t, page)

	for _, c := range []struct {
		name    string
		form    url.Values
		headers []string
	}{
		{"another site", url.Values{"csrf": {token}, "code": {code}}, []string{"Sec-Fetch-Site", "cross-site"}},
		{"no token", url.Values{"code": {code}}, []string{"Sec-Fetch-Site", "same-origin"}},
		{"wrong token", url.Values{"csrf": {strings.Repeat("A", len(token))}, "code": {code}}, []string{"Sec-Fetch-Site", "same-origin"}},
	} {
		if res, _ := b.do("POST", "/settings/sign-in", c.form, c.headers...); res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
			t.Fatalf("Continue, %s: status %d, cookies %v; want 403, none", c.name, res.StatusCode, res.Header["Set-Cookie"])
		}
		if got := whoAmI(t, b); got != emailA {
			t.Fatalf("after Continue, %s: signed in as %q, want %q", c.name, got, emailA)
		}
	}

	res, _ = b.do("POST", "/settings/sign-in", url.Values{"csrf": {token}, "code": {code}}, "Sec-Fetch-Site", "same-origin")
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("Continue: status %d, cookies %v; want 303 and the new session", res.StatusCode, res.Header["Set-Cookie"])
	}
	if got := whoAmI(t, b); got != emailB {
		t.Fatalf("after Continue: signed in as %q, want %q", got, emailB)
	}
	// The code was used once, by Continue.
	if res, _ := b.do("POST", "/settings/sign-in", url.Values{"csrf": {csrf(t, page)}, "code": {code}}, "Sec-Fetch-Site", "same-origin"); res.StatusCode == http.StatusSeeOther {
		t.Fatal("the code signed in twice")
	}
}

// TestForeignIdsAreNotFound: deactivate, rotate and revoke with another
// workspace's client id, and disable with another workspace's endpoint,
// answer 404; the session keeps working, the other workspace's audit log
// gets no row, and partner_settings_foreign_ids_total counts each (issue
// 34, item 8).
func TestForeignIdsAreNotFound(t *testing.T) {
	h := servertest.New(t)
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	wsA, memberA := h.Workspace("Foreign A")
	wsB, memberB := h.Workspace("Foreign B")
	clientA, _ := h.Client(wsA, memberA, "leads:read")
	clientB, _ := h.Client(wsB, memberB, "leads:read")
	endpointB := opaqueid.Format(opaqueid.Webhook, seedEndpoint(t, h, wsB, clientB, "https://hooks.example.com/b"))
	wsBID, _ := opaqueid.Parse(opaqueid.Workspace, wsB)
	auditB := func() int {
		var n int
		if err := raw.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE workspace_id = $1`, wsBID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// B's endpoint is disabled by B's administrator, so that an Enable
	// from A would show.
	if _, err := raw.Exec(ctx, `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'admin' WHERE workspace_id = $1`, wsBID); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, h)
	signIn(t, h, b, memberA)
	emailA := whoAmI(t, b)
	_, page := b.do("GET", "/settings/", nil)
	token := csrf(t, page)
	before := auditB()
	clients := counterValue(t, metrics.SettingsForeignIDs.WithLabelValues("client"))
	endpoints := counterValue(t, metrics.SettingsForeignIDs.WithLabelValues("webhook_endpoint"))
	for _, path := range []string{
		"/settings/clients/" + clientB + "/deactivate",
		"/settings/clients/" + clientB + "/rotate",
		"/settings/clients/" + clientB + "/revoke",
		"/settings/clients/" + clientB + "/webhooks/" + endpointB + "/disable",
		"/settings/clients/" + clientA + "/webhooks/" + endpointB + "/disable",
		"/settings/clients/" + clientB + "/webhooks/" + endpointB + "/enable",
		"/settings/clients/" + clientA + "/webhooks/" + endpointB + "/enable",
	} {
		res, page := b.do("POST", path, url.Values{"csrf": {token}, "form_id": {"f0000000000000000000000"}}, "Sec-Fetch-Site", "same-origin")
		if res.StatusCode != http.StatusNotFound || !strings.Contains(page, "Not found") || len(res.Cookies()) != 0 {
			t.Errorf("POST %s: status %d, cookies %v; want 404 Not found, the session untouched\n%s", path, res.StatusCode, res.Header["Set-Cookie"], page)
		}
		if got := whoAmI(t, b); got != emailA {
			t.Fatalf("after POST %s: signed in as %q, want %q", path, got, emailA)
		}
	}
	// The confirmation of Disable (a GET) is refused the same way.
	for _, path := range []string{
		"/settings/clients/" + clientB + "/webhooks/" + endpointB + "/disable",
		"/settings/clients/" + clientA + "/webhooks/" + endpointB + "/disable",
	} {
		if res, page := b.do("GET", path, nil); res.StatusCode != http.StatusNotFound || !strings.Contains(page, "Not found") || strings.Contains(page, "hooks.example.com/b") {
			t.Errorf("GET %s: status %d; want 404 Not found, without B's endpoint\n%s", path, res.StatusCode, page)
		}
	}
	if n := auditB(); n != before {
		t.Errorf("B's audit log: %d rows, was %d", n, before)
	}
	if d := counterValue(t, metrics.SettingsForeignIDs.WithLabelValues("client")) - clients; d != 6 {
		t.Errorf("partner_settings_foreign_ids_total{kind=client} moved by %v, want 6", d)
	}
	if d := counterValue(t, metrics.SettingsForeignIDs.WithLabelValues("webhook_endpoint")) - endpoints; d != 3 {
		t.Errorf("partner_settings_foreign_ids_total{kind=webhook_endpoint} moved by %v, want 3", d)
	}
	var status string
	if err := raw.QueryRow(ctx, `SELECT status FROM api_clients WHERE id = $1`, mustClient(t, clientB)).Scan(&status); err != nil || status != "active" {
		t.Errorf("B's client: %q %v, want active", status, err)
	}
	if err := raw.QueryRow(ctx, `SELECT status FROM webhook_endpoints WHERE workspace_id = $1`, wsBID).Scan(&status); err != nil || status != "disabled" {
		t.Errorf("B's endpoint: %q %v, want disabled still", status, err)
	}
}

func mustClient(t *testing.T, id string) any {
	t.Helper()
	u, ok := opaqueid.Parse(opaqueid.Client, id)
	if !ok {
		t.Fatalf("client id %q", id)
	}
	return u
}

func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
