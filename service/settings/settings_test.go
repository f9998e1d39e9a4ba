package settings_test

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/service/admin"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
	"github.com/svat/partnerapi/service/settings"
)

// signInLink asks the admin API for a member's sign-in link.
func signInLink(t *testing.T, h *servertest.Harness, member string, ttl time.Duration) string {
	t.Helper()
	req := &adminv1.CreateSignInLinkRequest{MemberId: member}
	if ttl != 0 {
		req.Ttl = durationpb.New(ttl)
	}
	res, err := h.AdminClient.CreateSignInLink(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("create sign-in link: %v", err)
	}
	return res.Msg.GetUrl()
}

// browser is a cookie-keeping HTTP client that does not follow redirects
// and sends what a browser sends for a same-origin form.
type browser struct {
	t      *testing.T
	client *http.Client
	base   string
}

func newBrowser(t *testing.T, h *servertest.Harness) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: h.Admin.URL, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request; headers are name, value pairs.
func (b *browser) do(method, u string, form url.Values, headers ...string) (*http.Response, string) {
	b.t.Helper()
	if strings.HasPrefix(u, "/") {
		u = b.base + u
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	page, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return res, string(page)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token of a page's forms.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

var formIDField = regexp.MustCompile(`name="form_id" value="([^"]+)"`)

// formID reads the form id of a page's form that shows a secret.
func formID(t *testing.T, page string) string {
	t.Helper()
	m := formIDField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form id in the page:\n%s", page)
	}
	return m[1]
}

var inlineScript = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>|\son[a-z]+\s*=|\sstyle\s*=|javascript:`)

// assertPageHeaders checks what every settings answer needs, and that
// its HTML has nothing inline the CSP would refuse (a script element
// without src, an event handler attribute, a style attribute).
func assertPageHeaders(t *testing.T, what string, res *http.Response, page, frameAncestors string) {
	t.Helper()
	hd := res.Header
	csp := hd.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") ||
		!strings.HasSuffix(csp, "frame-ancestors "+frameAncestors) || !strings.Contains(csp, "default-src 'none'") ||
		!strings.Contains(csp, "style-src 'self'") || !strings.Contains(csp, "form-action 'self'") {
		t.Errorf("%s: CSP %q", what, csp)
	}
	if hd.Get("Referrer-Policy") != "no-referrer" || hd.Get("Cache-Control") != "no-store" || hd.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%s: Referrer-Policy %q, Cache-Control %q, X-Content-Type-Options %q", what,
			hd.Get("Referrer-Policy"), hd.Get("Cache-Control"), hd.Get("X-Content-Type-Options"))
	}
	if strings.HasPrefix(hd.Get("Content-Type"), "text/html") {
		for _, tag := range inlineScript.FindAllString(page, -1) {
			if !regexp.MustCompile(`^<script src="[^"]+"></script>$`).MatchString(tag + "</script>") {
				t.Errorf("%s: inline content the CSP refuses: %q", what, tag)
			}
		}
	}
}

func clientCount(t *testing.T, h *servertest.Harness, ws, member string) int {
	t.Helper()
	res, err := h.AdminClient.ListApiClients(context.Background(), connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: ws, MemberId: member}))
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Msg.GetClients())
}

// TestSignInLink: a link signs in once, with a cookie HttpOnly,
// SameSite=Strict, for 8 hours; a reused or expired link does not.
func TestSignInLink(t *testing.T) {
	h := servertest.New(t)
	_, member := h.Workspace("Links")
	link := signInLink(t, h, member, 0)
	if !strings.HasPrefix(link, h.Admin.URL+"/settings/sign-in?code=") {
		t.Fatalf("link %q: want %s/settings/sign-in?code=…", link, h.Admin.URL)
	}
	b := newBrowser(t, h)
	res, _ := b.do("GET", link, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/settings/" {
		t.Fatalf("sign-in: status %d Location %q, want 303 /settings/", res.StatusCode, res.Header.Get("Location"))
	}
	cookies := res.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("sign-in set %d cookies, want 1: %v", len(cookies), res.Header["Set-Cookie"])
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure || c.MaxAge != 8*3600 || len(c.Value) < 43 {
		t.Fatalf("cookie %q: want HttpOnly, SameSite=Strict, Path=/, Max-Age=28800, not Secure over http, 256 bits", res.Header.Get("Set-Cookie"))
	}
	if strings.Contains(link, c.Value) {
		t.Fatal("the session cookie is the link's code")
	}
	// Only hashes are stored: the code's and the session token's SHA-256,
	// never either value.
	code := strings.SplitN(link, "code=", 2)[1]
	raw := dbtest.Raw(t, h.DB)
	var stored, sessions int
	codeSum, tokenSum := sha256.Sum256([]byte(code)), sha256.Sum256([]byte(c.Value))
	if err := raw.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM settings_sign_in_codes WHERE code_hash = $1 AND used_at IS NOT NULL),
		(SELECT count(*) FROM settings_sessions WHERE token_hash = $2)`, codeSum[:], tokenSum[:]).Scan(&stored, &sessions); err != nil {
		t.Fatal(err)
	}
	var plain bool
	if err := raw.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM settings_sign_in_codes WHERE position(convert_to($1, 'UTF8') IN code_hash) > 0)
		OR EXISTS (SELECT FROM settings_sessions WHERE position(convert_to($2, 'UTF8') IN token_hash) > 0)`, code, c.Value).Scan(&plain); err != nil {
		t.Fatal(err)
	}
	if stored != 1 || sessions != 1 || plain {
		t.Fatalf("stored: %d used code hash, %d session hash, a plain value %v; want 1, 1, false", stored, sessions, plain)
	}
	if res, page := b.do("GET", "/settings/", nil); res.StatusCode != http.StatusOK || !strings.Contains(page, "<caption>API clients</caption>") {
		t.Fatalf("clients page after sign-in: status %d\n%s", res.StatusCode, page)
	}

	// The same link again, in another browser: refused, no session.
	other := newBrowser(t, h)
	if res, page := other.do("GET", link, nil); res.StatusCode != http.StatusBadRequest || len(res.Cookies()) != 0 ||
		!strings.Contains(page, "This sign-in link does not work") {
		t.Fatalf("reused link: status %d, cookies %v, want 400 and none", res.StatusCode, res.Header["Set-Cookie"])
	}
	if res, _ := other.do("GET", "/settings/", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after a reused link: status %d, want 401", res.StatusCode)
	}

	// An expired link.
	late := signInLink(t, h, member, time.Minute)
	h.Clock.Advance(time.Minute + time.Second)
	if res, _ := other.do("GET", late, nil); res.StatusCode != http.StatusBadRequest || len(res.Cookies()) != 0 {
		t.Fatalf("expired link: status %d, cookies %v, want 400 and none", res.StatusCode, res.Header["Set-Cookie"])
	}
	// A made-up code.
	if res, _ := other.do("GET", "/settings/sign-in?code=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("made-up code: status %d, want 400", res.StatusCode)
	}
}

// TestSignInLinkRules: at most 5 minutes, only for a member with settings
// access (refused and audited otherwise), over REST too, and the link is
// PARTNER_SETTINGS_URL's when it is set.
func TestSignInLinkRules(t *testing.T) {
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) { c.SettingsURL = "https://crm.example.com/partner-settings/" }})
	ws, member := h.Workspace("Rules")
	ctx := context.Background()
	res, err := h.AdminClient.CreateSignInLink(ctx, connect.NewRequest(&adminv1.CreateSignInLinkRequest{MemberId: member}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Msg.GetUrl(), "https://crm.example.com/partner-settings/sign-in?code=") {
		t.Fatalf("url %q: want PARTNER_SETTINGS_URL's", res.Msg.GetUrl())
	}
	if d := time.Until(res.Msg.GetExpiresAt().AsTime()); d > 5*time.Minute+time.Second || d < 4*time.Minute {
		t.Fatalf("expiresAt in %s, want 5m (the default)", d)
	}
	// Behind the CRM's https proxy: the cookie is Secure, a __Host- cookie,
	// and the redirect goes to the public path.
	u := mustURL(t, res.Msg.GetUrl())
	signIn, _ := newBrowser(t, h).do("GET", "/settings/sign-in?"+u.RawQuery, nil)
	if signIn.StatusCode != http.StatusSeeOther || signIn.Header.Get("Location") != "/partner-settings/" ||
		len(signIn.Cookies()) != 1 || !signIn.Cookies()[0].Secure || signIn.Cookies()[0].Name != "__Host-partner_settings" {
		t.Fatalf("sign-in behind https: status %d, Location %q, Set-Cookie %q", signIn.StatusCode, signIn.Header.Get("Location"), signIn.Header["Set-Cookie"])
	}
	_, err = h.AdminClient.CreateSignInLink(ctx, connect.NewRequest(&adminv1.CreateSignInLinkRequest{MemberId: member, Ttl: durationpb.New(6 * time.Minute)}))
	servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")

	pending, err := h.AdminClient.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: ws, Email: "plain@rules.test"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.AdminClient.CreateSignInLink(ctx, connect.NewRequest(&adminv1.CreateSignInLinkRequest{MemberId: pending.Msg.GetId()}))
	servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
	events, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: member}))
	if err != nil {
		t.Fatal(err)
	}
	var refused, made bool
	for _, e := range events.Msg.GetEvents() {
		refused = refused || (e.GetAction() == admin.ActionSignInLink && e.GetOutcome() == admin.OutcomeRefused &&
			e.GetReason() == admin.ReasonNoSettingsAccess && e.GetMemberId() == pending.Msg.GetId())
		made = made || (e.GetAction() == admin.ActionSignInLink && e.GetOutcome() == admin.OutcomeSucceeded && e.GetMemberId() == member)
	}
	if !refused || !made {
		t.Fatalf("audit log: refused %v, made %v; want both", refused, made)
	}

	// REST, as the CRM would call it.
	req, _ := http.NewRequest("POST", h.Admin.URL+"/admin/v1/members/"+member+":createSignInLink", strings.NewReader(`{"ttl":"60s"}`))
	req.Header.Set("Content-Type", "application/json")
	rest, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(rest.Body)
	rest.Body.Close()
	p := servertest.Decode(t, body)
	if rest.StatusCode != http.StatusOK || !strings.Contains(p["url"].(string), "/sign-in?code=") || p["expiresAt"] == nil {
		t.Fatalf("REST createSignInLink: %d %s", rest.StatusCode, body)
	}
}

// TestCrossSiteSignIn: opened from the CRM (another site), the sign-in
// answers with a page that reloads the link from the page's own site,
// because a SameSite=Strict cookie is not sent on another site's
// navigation; the reload signs in.
func TestCrossSiteSignIn(t *testing.T) {
	h := servertest.New(t)
	_, member := h.Workspace("Cross")
	b := newBrowser(t, h)
	link := signInLink(t, h, member, 0)
	// From another site the Strict cookie is not sent, so the page cannot
	// tell whether the browser is signed in as someone else (issue 34,
	// item 7): it redeems nothing and reloads the link from its own site.
	res, page := b.do("GET", link, nil, "Sec-Fetch-Site", "cross-site")
	self := `<meta http-equiv="refresh" content="0;url=/settings/sign-in?code=` + strings.SplitN(link, "code=", 2)[1] + `">`
	if res.StatusCode != http.StatusOK || len(res.Cookies()) != 0 || !strings.Contains(page, self) {
		t.Fatalf("cross-site sign-in: status %d, cookies %v\n%s", res.StatusCode, res.Header["Set-Cookie"], page)
	}
	res, _ = b.do("GET", link, nil, "Sec-Fetch-Site", "same-origin")
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 || res.Header.Get("Location") != "/settings/" {
		t.Fatalf("the reload: status %d, cookies %v", res.StatusCode, res.Header["Set-Cookie"])
	}
}

// TestForgedForms: a state-changing form without the CSRF token, with a
// wrong one, or from another origin is refused 403 and changes nothing;
// the same form from the page's own origin with its token works.
func TestForgedForms(t *testing.T) {
	h := servertest.New(t)
	ws, member := h.Workspace("Forged")
	b := newBrowser(t, h)
	b.do("GET", signInLink(t, h, member, 0), nil)
	_, page := b.do("GET", "/settings/clients/new", nil)
	token, id := csrf(t, page), formID(t, page)
	form := func(token string) url.Values {
		v := url.Values{"name": {"forged"}, "scope": {"contacts:read"}, "form_id": {id}}
		if token != "" {
			v.Set("csrf", token)
		}
		return v
	}
	for _, c := range []struct {
		name    string
		form    url.Values
		headers []string
	}{
		{"no token", form(""), []string{"Sec-Fetch-Site", "same-origin"}},
		{"wrong token", form(strings.Repeat("A", len(token))), []string{"Sec-Fetch-Site", "same-origin"}},
		{"another site", form(token), []string{"Sec-Fetch-Site", "cross-site"}},
		{"another origin", form(token), []string{"Origin", "https://evil.example"}},
		{"a sibling site", form(token), []string{"Sec-Fetch-Site", "same-site"}},
	} {
		res, page := b.do("POST", "/settings/clients", c.form, c.headers...)
		if res.StatusCode != http.StatusForbidden || strings.Contains(page, "Client secret") {
			t.Errorf("%s: status %d, want 403", c.name, res.StatusCode)
		}
		if n := clientCount(t, h, ws, member); n != 0 {
			t.Fatalf("%s: %d clients exist, want 0", c.name, n)
		}
	}
	// Sign-out is a form too.
	if res, _ := b.do("POST", "/settings/sign-out", url.Values{}, "Sec-Fetch-Site", "same-origin"); res.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out without token: status %d, want 403", res.StatusCode)
	}
	// The control: the same form, same origin, with its token. A browser
	// that sends Origin: null (Referrer-Policy: no-referrer) sends
	// Sec-Fetch-Site too, which decides.
	res, page := b.do("POST", "/settings/clients", form(token), "Sec-Fetch-Site", "same-origin", "Origin", "null")
	if res.StatusCode != http.StatusOK || !strings.Contains(page, "Client secret") {
		t.Fatalf("genuine form: status %d\n%s", res.StatusCode, page)
	}
	if n := clientCount(t, h, ws, member); n != 1 {
		t.Fatalf("%d clients exist after the genuine form, want 1", n)
	}
}

// TestHeaders: every settings answer has the CSP (no inline script,
// frame-ancestors as configured), no referrer, no caching; the admin API
// beside it still needs the admin token.
func TestHeaders(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{"", "'none'"},
		{"https://crm.example.com", "https://crm.example.com"},
		{"https://crm.example.com https://*.crm.example.com", "https://crm.example.com https://*.crm.example.com"},
	} {
		h := servertest.New(t, servertest.Options{AdminToken: "admintoken", Config: func(cfg *server.Config) { cfg.SettingsFrameAncestors = c.config }})
		ws, member := h.Workspace("Headers")
		b := newBrowser(t, h)
		b.do("GET", signInLink(t, h, member, 0), nil)
		clientID, _ := h.Client(ws, member, "contacts:read")
		for _, path := range []string{"/settings/", "/settings/clients/new", "/settings/clients/" + clientID,
			"/settings/clients/" + clientID + "/rotate", "/settings/clients/" + clientID + "/revoke",
			"/settings/audit", "/settings/nowhere", "/settings/static/copy.js", "/settings/static/style.css"} {
			res, page := b.do("GET", path, nil)
			if res.StatusCode != http.StatusOK && path != "/settings/nowhere" {
				t.Errorf("%s: status %d", path, res.StatusCode)
			}
			assertPageHeaders(t, path, res, page, c.want)
		}
		// Signed out, and a bad link: the same headers.
		for _, path := range []string{"/settings/sign-in?code=nothing", "/settings/"} {
			res, page := newBrowser(t, h).do("GET", path, nil)
			assertPageHeaders(t, "signed out "+path, res, page, c.want)
		}
		// The page is served without the admin token; the admin API is not.
		if res, _ := b.do("POST", "/partner.admin.v1.AdminService/ListWorkspaces", nil, "Content-Type", "application/json"); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("admin API without token: status %d, want 401", res.StatusCode)
		}
	}
}

// TestSessionEnds: a session ends after 30 minutes idle, 8 hours after
// sign-in however busy, at "Sign out" (server-side: the old cookie no
// longer works), and at the next request of a member who lost settings
// access.
func TestSessionEnds(t *testing.T) {
	h := servertest.New(t)
	_, member := h.Workspace("Ends")
	ok := func(b *browser) bool {
		res, _ := b.do("GET", "/settings/", nil)
		return res.StatusCode == http.StatusOK
	}

	idle := newBrowser(t, h)
	idle.do("GET", signInLink(t, h, member, 0), nil)
	h.Clock.Advance(29 * time.Minute)
	if !ok(idle) {
		t.Fatal("session ended before 30 minutes idle")
	}
	h.Clock.Advance(31 * time.Minute)
	if ok(idle) {
		t.Fatal("session survived 31 minutes idle")
	}

	busy := newBrowser(t, h)
	busy.do("GET", signInLink(t, h, member, 0), nil)
	for range 23 { // 7 h 40 min of a request every 20 minutes
		h.Clock.Advance(20 * time.Minute)
		if !ok(busy) {
			t.Fatal("a busy session ended before 8 hours")
		}
	}
	h.Clock.Advance(21 * time.Minute)
	if ok(busy) {
		t.Fatal("a session outlived 8 hours")
	}

	out := newBrowser(t, h)
	out.do("GET", signInLink(t, h, member, 0), nil)
	_, page := out.do("GET", "/settings/", nil)
	cookies := out.client.Jar.Cookies(mustURL(t, h.Admin.URL))
	res, _ := out.do("POST", "/settings/sign-out", url.Values{"csrf": {csrf(t, page)}}, "Sec-Fetch-Site", "same-origin")
	if res.StatusCode != http.StatusOK || ok(out) {
		t.Fatalf("sign-out: status %d, or the session survived", res.StatusCode)
	}
	// The cookie the browser had, replayed: the session is gone.
	replay := newBrowser(t, h)
	replay.client.Jar.SetCookies(mustURL(t, h.Admin.URL), cookies)
	if ok(replay) {
		t.Fatal("a signed-out session's cookie still works")
	}

	lost := newBrowser(t, h)
	lost.do("GET", signInLink(t, h, member, 0), nil)
	if !ok(lost) {
		t.Fatal("fresh session refused")
	}
	ctx := context.Background()
	if _, err := h.AdminClient.SetMemberSettingsAccess(ctx, connect.NewRequest(&adminv1.SetMemberSettingsAccessRequest{MemberId: member, SettingsAccess: false})); err != nil {
		t.Fatal(err)
	}
	if res, page := lost.do("GET", "/settings/", nil); res.StatusCode != http.StatusForbidden || !strings.Contains(page, "No settings access") {
		t.Fatalf("after losing access: status %d, want 403", res.StatusCode)
	}
	// Access back: the old session stays ended, and no link is made
	// while it was withdrawn.
	if _, err := h.AdminClient.SetMemberSettingsAccess(ctx, connect.NewRequest(&adminv1.SetMemberSettingsAccessRequest{MemberId: member, SettingsAccess: true})); err != nil {
		t.Fatal(err)
	}
	if res, _ := lost.do("GET", "/settings/", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the withdrawn session after access came back: status %d, want 401", res.StatusCode)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestNothingSecretInTheLog: the access log names the settings routes,
// never the sign-in code, the session cookie, the CSRF token or a client
// secret.
func TestNothingSecretInTheLog(t *testing.T) {
	logs := &servertest.LogBuffer{}
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) {
		c.Log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	ws, member := h.Workspace("Quiet")
	link := signInLink(t, h, member, 0)
	b := newBrowser(t, h)
	b.do("GET", link, nil)
	_, page := b.do("GET", "/settings/clients/new", nil)
	token := csrf(t, page)
	_, page = b.do("POST", "/settings/clients", url.Values{"csrf": {token}, "form_id": {formID(t, page)}, "name": {"quiet"}, "scope": {"leads:read"}}, "Sec-Fetch-Site", "same-origin")
	secret := regexp.MustCompile(`svcs_[A-Za-z0-9_-]{43}`).FindString(page)
	if secret == "" || clientCount(t, h, ws, member) != 1 {
		t.Fatalf("no client secret on the page:\n%s", page)
	}
	b.do("GET", "/settings/nowhere?x=1", nil)
	code := strings.SplitN(link, "code=", 2)[1]
	var cookie string
	for _, c := range b.client.Jar.Cookies(mustURL(t, h.Admin.URL)) {
		if c.Name == "partner_settings" {
			cookie = c.Value
		}
	}
	if cookie == "" {
		t.Fatal("no session cookie")
	}
	out := logs.String()
	for name, s := range map[string]string{"code": code, "cookie": cookie, "csrf token": token, "secret": secret} {
		if strings.Contains(out, s) {
			t.Errorf("the log holds the %s", name)
		}
	}
	for _, route := range []string{`"route":"/settings/sign-in"`, `"route":"/settings/clients"`, `"route":"unmatched"`} {
		if !strings.Contains(out, route) {
			t.Errorf("the log lacks %s:\n%s", route, out)
		}
	}
}

var secretOnPage = regexp.MustCompile(`svcs_[A-Za-z0-9_-]{43}`)

// TestSecretFormsActOnce: the answers that show a secret are no-store
// with the page's headers, and the form behind them acts once: sent
// again (a reload of the secret page, or Back and a resubmission), it
// creates no second client, rotates nothing, and shows no secret; a form
// without its form id is refused.
func TestSecretFormsActOnce(t *testing.T) {
	h := servertest.New(t)
	ws, member := h.Workspace("Once")
	b := newBrowser(t, h)
	b.do("GET", signInLink(t, h, member, 0), nil)
	_, page := b.do("GET", "/settings/clients/new", nil)
	id := formID(t, page)
	if _, again := b.do("GET", "/settings/clients/new", nil); formID(t, again) == id {
		t.Fatal("two renderings of the form share a form id")
	}
	form := url.Values{"csrf": {csrf(t, page)}, "form_id": {id}, "name": {"once"}, "scope": {"contacts:read", "leads:read"}}
	same := []string{"Sec-Fetch-Site", "same-origin"}

	// A validation error keeps the form's id, so the corrected form acts.
	bad := url.Values{"csrf": form["csrf"], "form_id": {id}, "name": {""}, "scope": {"contacts:read"}}
	if res, again := b.do("POST", "/settings/clients", bad, same...); res.StatusCode != http.StatusUnprocessableEntity || formID(t, again) != id {
		t.Fatalf("invalid form: status %d, or the form id changed", res.StatusCode)
	}

	// A rate out of range: its error next to its field.
	rate := url.Values{"csrf": form["csrf"], "form_id": {id}, "name": {"rated"}, "scope": {"contacts:read"}, "read_rate": {"0"}}
	if res, again := b.do("POST", "/settings/clients", rate, same...); res.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(again, `aria-describedby="read-rate-error rate-hint" aria-invalid="true"`) ||
		!strings.Contains(again, `<p class="error" id="read-rate-error">Enter a whole number`) {
		t.Fatalf("read rate 0: status %d, want 422 and the error next to the field\n%s", res.StatusCode, again)
	}

	res, page := b.do("POST", "/settings/clients", form, same...)
	secret := secretOnPage.FindString(page)
	if res.StatusCode != http.StatusOK || secret == "" || !strings.Contains(page, `id="client-secret"`) {
		t.Fatalf("create: status %d\n%s", res.StatusCode, page)
	}
	assertPageHeaders(t, "the created client's secret", res, page, "'none'")
	clientID := regexp.MustCompile(`cli_[a-z0-9]+`).FindString(page)
	if status, scope, _ := tokenStatus(t, h, clientID, secret); status != http.StatusOK || scope != "contacts:read leads:read" {
		t.Fatalf("the page's secret: token status %d scope %q", status, scope)
	}

	// The same form again.
	res, page = b.do("POST", "/settings/clients", form, same...)
	if res.StatusCode != http.StatusConflict || secretOnPage.MatchString(page) || !strings.Contains(page, "Already done") {
		t.Fatalf("the create form sent again: status %d, want 409 without a secret\n%s", res.StatusCode, page)
	}
	assertPageHeaders(t, "the create form sent again", res, page, "'none'")
	if n := clientCount(t, h, ws, member); n != 1 {
		t.Fatalf("%d clients after the form was sent twice, want 1", n)
	}
	// Without a form id, or with a malformed one: refused, nothing made.
	for _, v := range []string{"", "not-a-form-id", strings.Repeat("A", 21) + "."} {
		f := url.Values{"csrf": form["csrf"], "name": {"no id"}, "scope": {"contacts:read"}}
		if v != "" {
			f.Set("form_id", v)
		}
		if res, page := b.do("POST", "/settings/clients", f, same...); res.StatusCode != http.StatusBadRequest || secretOnPage.MatchString(page) {
			t.Fatalf("form id %q: status %d, want 400", v, res.StatusCode)
		}
	}
	if n := clientCount(t, h, ws, member); n != 1 {
		t.Fatalf("%d clients, want 1", n)
	}

	// Rotate: the new secret once; the form again rotates nothing.
	_, page = b.do("GET", "/settings/clients/"+clientID+"/rotate", nil)
	rotate := url.Values{"csrf": {csrf(t, page)}, "form_id": {formID(t, page)}}
	res, page = b.do("POST", "/settings/clients/"+clientID+"/rotate", rotate, same...)
	rotated := secretOnPage.FindString(page)
	if res.StatusCode != http.StatusOK || rotated == "" || rotated == secret {
		t.Fatalf("rotate: status %d\n%s", res.StatusCode, page)
	}
	assertPageHeaders(t, "the rotated secret", res, page, "'none'")
	res, page = b.do("POST", "/settings/clients/"+clientID+"/rotate", rotate, same...)
	if res.StatusCode != http.StatusConflict || secretOnPage.MatchString(page) {
		t.Fatalf("the rotate form sent again: status %d, want 409 without a secret\n%s", res.StatusCode, page)
	}
	if status, _, _ := tokenStatus(t, h, clientID, rotated); status != http.StatusOK {
		t.Fatalf("the secret shown by the rotation, after its form was sent again: status %d, want 200 (rotated once)", status)
	}
	if status, _, _ := tokenStatus(t, h, clientID, secret); status != http.StatusUnauthorized {
		t.Fatalf("the first secret after rotation: status %d, want 401", status)
	}
	// The spent form ids are in a cookie of the browser, HttpOnly and
	// SameSite=Strict, never a secret.
	for _, c := range b.client.Jar.Cookies(mustURL(t, h.Admin.URL)) {
		if c.Name == "partner_settings_sent" && (strings.Contains(c.Value, "svcs_") || !strings.Contains(c.Value, rotate.Get("form_id"))) {
			t.Fatalf("spent forms cookie %q", c.Value)
		}
	}
}

// TestEveryFormIsGuarded: each state-changing form of the page (rotate,
// deactivate, activate, revoke, a webhook endpoint's disable, sign out)
// is refused 403 without its CSRF token or from another site, and
// changes nothing.
func TestEveryFormIsGuarded(t *testing.T) {
	h := servertest.New(t)
	ws, member := h.Workspace("Guarded")
	clientID, secret := h.Client(ws, member, "contacts:read")
	b := newBrowser(t, h)
	b.do("GET", signInLink(t, h, member, 0), nil)
	_, page := b.do("GET", "/settings/clients/"+clientID+"/rotate", nil)
	token, id := csrf(t, page), formID(t, page)
	for _, path := range []string{"/clients/" + clientID + "/rotate", "/clients/" + clientID + "/deactivate",
		"/clients/" + clientID + "/activate", "/clients/" + clientID + "/revoke",
		"/clients/" + clientID + "/webhooks/whk_00000000000000000000000000/disable", "/sign-out"} {
		for _, c := range []struct {
			name    string
			form    url.Values
			headers []string
		}{
			{"no token", url.Values{"form_id": {id}}, []string{"Sec-Fetch-Site", "same-origin"}},
			{"wrong token", url.Values{"csrf": {strings.Repeat("A", len(token))}, "form_id": {id}}, []string{"Sec-Fetch-Site", "same-origin"}},
			{"another site", url.Values{"csrf": {token}, "form_id": {id}}, []string{"Sec-Fetch-Site", "cross-site"}},
			{"another origin", url.Values{"csrf": {token}, "form_id": {id}}, []string{"Origin", "https://evil.example"}},
		} {
			if res, page := b.do("POST", "/settings"+path, c.form, c.headers...); res.StatusCode != http.StatusForbidden || secretOnPage.MatchString(page) {
				t.Errorf("%s, %s: status %d, want 403", path, c.name, res.StatusCode)
			}
		}
	}
	// Nothing changed: the secret works, the client is active, the
	// session lives.
	if status, _, _ := tokenStatus(t, h, clientID, secret); status != http.StatusOK {
		t.Fatalf("after refused forms the client's secret: status %d, want 200", status)
	}
	if res, page := b.do("GET", "/settings/clients/"+clientID, nil); res.StatusCode != http.StatusOK || !strings.Contains(page, "<dd>active</dd>") {
		t.Fatalf("after refused forms the client's page: status %d\n%s", res.StatusCode, page)
	}
}

// TestSecureCookiesOverTLS: served over https directly (no
// PARTNER_SETTINGS_URL), the session cookie and the spent forms cookie
// are Secure __Host- cookies, HttpOnly, SameSite=Strict.
func TestSecureCookiesOverTLS(t *testing.T) {
	h := servertest.New(t)
	ws, member := h.Workspace("TLS")
	page, err := settings.New(settings.Config{DB: h.DB, Admin: &admin.Service{DB: h.DB}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(page)
	defer srv.Close()
	b := newBrowser(t, h)
	b.base = srv.URL
	b.client.Transport = srv.Client().Transport
	link := mustURL(t, signInLink(t, h, member, 0))
	res, _ := b.do("GET", "/settings/sign-in?"+link.RawQuery, nil)
	if sc := res.Cookies(); res.StatusCode != http.StatusSeeOther || len(sc) != 1 || sc[0].Name != "__Host-partner_settings" ||
		!sc[0].Secure || !sc[0].HttpOnly || sc[0].SameSite != http.SameSiteStrictMode || sc[0].Path != "/" || sc[0].MaxAge != 8*3600 {
		t.Fatalf("sign-in over https: status %d, Set-Cookie %q; want 303 and a Secure, HttpOnly, SameSite=Strict __Host- cookie for 8 h",
			res.StatusCode, res.Header["Set-Cookie"])
	}
	_, form := b.do("GET", "/settings/clients/new", nil)
	res, _ = b.do("POST", "/settings/clients", url.Values{"csrf": {csrf(t, form)}, "form_id": {formID(t, form)}, "name": {"tls"}, "scope": {"contacts:read"}},
		"Sec-Fetch-Site", "same-origin")
	if res.StatusCode != http.StatusOK || clientCount(t, h, ws, member) != 1 {
		t.Fatalf("create over https: status %d", res.StatusCode)
	}
	for _, c := range res.Cookies() {
		if c.Name != "__Host-partner_settings_sent" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
			t.Fatalf("cookie over https %q", res.Header["Set-Cookie"])
		}
	}
	cookies := b.client.Jar.Cookies(mustURL(t, srv.URL))
	names := map[string]bool{}
	for _, c := range cookies {
		names[c.Name] = true
	}
	if len(cookies) != 2 || !names["__Host-partner_settings"] || !names["__Host-partner_settings_sent"] {
		t.Fatalf("cookies over https: %v, want the two __Host- cookies", cookies)
	}
}

// TestAnUnavailableDatabaseIsBusyNotBroken: a page whose database cannot
// be reached (a failover, a primary that can no longer confirm commits)
// answers 503 "Try again", as the API answers it, not 500 "Something went
// wrong" with an error in the log.
func TestAnUnavailableDatabaseIsBusyNotBroken(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	_ = closed.Close() // refuses connections
	d, err := db.OpenConfig(context.Background(), db.Config{URL: "postgres://partnerapi@" + addr + "/partnerapi?sslmode=disable"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	page, err := settings.New(settings.Config{DB: d, Admin: &admin.Service{DB: d}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(page)
	defer srv.Close()
	req, err := http.NewRequest("GET", srv.URL+"/settings/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "partner_settings", Value: "a-session-the-database-would-look-up"})
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "Try again") {
		t.Fatalf("a page with the database unreachable: status %d\n%s", res.StatusCode, body)
	}
}
