package settings_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	customfieldv1 "github.com/svat/partnerapi/gen/partner/customfield/v1"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/service/servertest"
)

// The browser tests drive Debian's chromium (installed by
// scripts/install-deps.sh, as `make test` runs it). Without it they fail,
// never skip: a skipped browser test would pass `make test` without the
// acceptance it stands for. PARTNER_CHROMIUM names another binary.
// UPDATE_SCREENSHOTS=1 writes a screenshot of each page to docs/settings/
// with an outline of the page's headings and controls (the pages hold
// fresh ids, times and secrets, so the images change at every run: they
// are written on request only); every other run checks that each
// screenshot is committed and that the page still has the outline it had
// when it was taken, so a changed page fails until its screenshot is
// taken again.

// chromium finds the browser or fails the test.
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv("PARTNER_CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		t.Fatal("no chromium on PATH: run scripts/install-deps.sh (make deps) or apt-get install chromium, or name a browser in PARTNER_CHROMIUM")
	}
	return path
}

// axeSource returns axe-core's script, installed with npm ci from
// testdata/package-lock.json into the user's cache directory (outside the
// working tree), once per lock file.
func axeSource(t *testing.T) string {
	t.Helper()
	lock, err := os.ReadFile("testdata/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile("testdata/package.json")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(append(append([]byte{}, manifest...), lock...))
	dir := filepath.Join(cache, "partnerapi", "settings-axe-"+hex.EncodeToString(sum[:8]))
	script := filepath.Join(dir, "node_modules", "axe-core", "axe.min.js")
	if _, err := os.Stat(script); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("npm is needed to install axe-core for the accessibility check (scripts/install-deps.sh installs it)")
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
		if err != nil {
			if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
				t.Fatal(err)
			}
			if tmp, err = os.MkdirTemp(filepath.Dir(dir), "install-"); err != nil {
				t.Fatal(err)
			}
		}
		defer os.RemoveAll(tmp)
		for name, b := range map[string][]byte{"package.json": manifest, "package-lock.json": lock} {
			if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci (axe-core): %v\n%s", err, out)
		}
		// Another test process may have won the race; its copy is as good.
		if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
			if _, statErr := os.Stat(script); statErr != nil {
				t.Fatalf("install axe-core: %v", err)
			}
		}
	}
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newBrowserTab starts a headless chromium with a tab; it ends with t.
func newBrowserTab(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.Headless,
		chromedp.WindowSize(1200, 900), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"), chromedp.Flag("hide-scrollbars", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; its context must not time out.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// tab is a browser tab the test drives as a member would: it finds
// controls by role and accessible name in Chrome's accessibility tree.
type tab struct {
	t   *testing.T
	ctx context.Context
}

func (b tab) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b tab) open(u string) { b.t.Helper(); b.run("open "+u, chromedp.Navigate(u)) }

// waitHeading waits for a loaded page whose h1 is heading. It asks the
// page again while a navigation replaces it (an evaluation in a page
// that is going away fails).
func (b tab) waitHeading(heading string) { b.t.Helper(); b.waitPage(heading, "") }

// waitPage waits for a loaded page whose h1 is heading and whose status
// message (role status) contains notice.
func (b tab) waitPage(heading, notice string) {
	b.t.Helper()
	q, _ := json.Marshal(notice)
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](
			`document.readyState === "complete" && document.querySelector("h1") && `+
				`(document.querySelector("[role=status]") || {textContent: ""}).textContent.includes(`+string(q)+`) ? `+
				`document.querySelector("h1").textContent : ""`))
		cancel()
		if err == nil && got == heading {
			return
		}
		if err == nil {
			last = got
		}
		<-tick.C
	}
	b.t.Fatalf("wait for the page %q (status %q): the page says %q", heading, notice, last)
}

// query lists the elements with the role and accessible name that the
// accessibility tree does not ignore.
func (b tab) query(role, name string) []*accessibility.Node {
	b.t.Helper()
	doc, err := chromedp.Run(b.ctx, chromedp.Evaluate[*runtime.RemoteObject](`document`))
	if err != nil {
		b.t.Fatal(err)
	}
	res, err := chromedp.Call(b.ctx, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{ObjectID: doc.ObjectID, AccessibleName: name, Role: role})
	if err != nil {
		b.t.Fatalf("find %s %q: %v", role, name, err)
	}
	var found []*accessibility.Node
	for _, n := range res.Nodes {
		if !n.Ignored {
			found = append(found, n)
		}
	}
	return found
}

// waitFor waits until a condition of the loaded page holds.
func (b tab) waitFor(what, cond string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === "complete" && (`+cond+`)`))
		if err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
			b.t.Fatalf("wait for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// find returns the one element with the role and accessible name.
func (b tab) find(role, name string) *runtime.RemoteObject {
	b.t.Helper()
	found := b.query(role, name)
	if len(found) != 1 {
		b.t.Fatalf("find %s %q: %d found, want 1", role, name, len(found))
	}
	obj, err := chromedp.Call(b.ctx, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: found[0].BackendDOMNodeID})
	if err != nil {
		b.t.Fatal(err)
	}
	return obj.Object
}

// has tells whether an element with the role and name is on the page.
func (b tab) has(role, name string) bool {
	b.t.Helper()
	return len(b.query(role, name)) > 0
}

// call runs a function on an element and returns its JSON result.
func (b tab) call(obj *runtime.RemoteObject, fn string) json.RawMessage {
	b.t.Helper()
	yes := true
	res, err := chromedp.Call(b.ctx, runtime.CallFunctionOn, runtime.CallFunctionOnParams{FunctionDeclaration: fn, ObjectID: obj.ObjectID, ReturnByValue: &yes})
	if err != nil {
		b.t.Fatal(err)
	}
	if res.ExceptionDetails != nil {
		b.t.Fatalf("%s: %s", fn, res.ExceptionDetails.Text)
	}
	return json.RawMessage(res.Result.Value)
}

// click activates a control found by role and name.
func (b tab) click(role, name string) {
	b.t.Helper()
	b.call(b.find(role, name), `function () { this.focus(); this.click(); }`)
}

// value reads a field found by role and name.
func (b tab) value(role, name string) string {
	b.t.Helper()
	var v string
	if err := json.Unmarshal(b.call(b.find(role, name), `function () { return this.value; }`), &v); err != nil {
		b.t.Fatal(err)
	}
	return v
}

// eval evaluates an expression of the page.
func evalIn[T any](b tab, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// html is the page as the browser has it now.
func (b tab) html() string {
	return evalIn[string](b, `document.documentElement.outerHTML`)
}

// screenshotDir is where the pages' screenshots are committed.
var screenshotDir = filepath.Join("..", "..", "docs", "settings")

// outlineFile holds, for each screenshot, the outline of the page it
// shows.
const outlineFile = "outline.txt"

// outlineJS lists the page's rendered headings, captions, column heads,
// labels, legends, controls and status messages, in document order: what
// a screenshot shows of the page's structure, without the ids, times and
// secrets that differ at every run.
const outlineJS = `[...document.querySelectorAll("h1, h2, caption, th, label, legend, a, button, input, select, textarea, [role=status], [role=alert], .error, .warning, .notice, .hint")]
	.filter(e => e.getClientRects().length > 0)
	.map(e => {
		const tag = e.tagName.toLowerCase() + (e.className ? "." + e.className.replace(/ /g, ".") : "");
		if (e.tagName === "INPUT") { return tag + " " + e.type + " " + (e.id || e.name); }
		return (tag + " " + e.textContent.replace(/\s+/g, " ").trim()).trim();
	})`

// screenshots takes the screenshots of docs/settings/ in a test.
type screenshots struct {
	t      *testing.T
	update bool
	want   map[string][]string // the committed outlines
	taken  map[string][]string
}

// newScreenshots reads the committed outlines; with UPDATE_SCREENSHOTS=1
// it writes the screenshots and outlines the test takes instead, and
// otherwise, once the test has passed, checks that it took every
// committed screenshot and that no other is committed.
func newScreenshots(t *testing.T) *screenshots {
	t.Helper()
	s := &screenshots{t: t, update: os.Getenv("UPDATE_SCREENSHOTS") == "1", want: map[string][]string{}, taken: map[string][]string{}}
	b, err := os.ReadFile(filepath.Join(screenshotDir, outlineFile))
	if err != nil && !s.update {
		t.Fatalf("read the screenshots' outlines: %v (UPDATE_SCREENSHOTS=1 writes them)", err)
	}
	name := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			name = strings.TrimPrefix(line, "## ")
			s.want[name] = []string{}
		case line != "" && name != "":
			s.want[name] = append(s.want[name], line)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if s.update {
			s.write()
			return
		}
		pngs, err := filepath.Glob(filepath.Join(screenshotDir, "*.png"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pngs {
			if _, ok := s.taken[strings.TrimSuffix(filepath.Base(p), ".png")]; !ok {
				t.Errorf("%s is committed but no test takes it: run UPDATE_SCREENSHOTS=1 go test ./service/settings -run InBrowser", p)
			}
		}
		for name := range s.want {
			if _, ok := s.taken[name]; !ok {
				t.Errorf("%s has an outline of %q, which no test takes: run UPDATE_SCREENSHOTS=1 go test ./service/settings -run InBrowser", outlineFile, name)
			}
		}
	})
	return s
}

// take screenshots the page as docs/settings/<name>.png when updating;
// otherwise it checks that the committed screenshot shows this page: it
// exists, and the page's outline is the one recorded when it was taken.
func (s *screenshots) take(b tab, name string) {
	b.t.Helper()
	outline := evalIn[[]string](b, outlineJS)
	s.taken[name] = outline
	png := filepath.Join(screenshotDir, name+".png")
	if !s.update {
		if _, err := os.Stat(png); err != nil {
			b.t.Errorf("no screenshot of the %s page: %v; run UPDATE_SCREENSHOTS=1 go test ./service/settings -run InBrowser", name, err)
		}
		if want, ok := s.want[name]; !ok || strings.Join(want, "\n") != strings.Join(outline, "\n") {
			b.t.Errorf("docs/settings/%s.png is out of date: the page now has\n\t%s\nbut when it was taken\n\t%s\nrun UPDATE_SCREENSHOTS=1 go test ./service/settings -run InBrowser, and commit docs/settings",
				name, strings.Join(outline, "\n\t"), strings.Join(want, "\n\t"))
		}
		return
	}
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(png, shot, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// write writes the outlines of the screenshots taken.
func (s *screenshots) write() {
	names := make([]string, 0, len(s.taken))
	for name := range s.taken {
		names = append(names, name)
	}
	slices.Sort(names)
	var out strings.Builder
	out.WriteString("# The outline of each page in docs/settings/*.png, as the browser test\n" +
		"# (service/settings, TestSettingsPageInBrowser) saw it when it took the\n" +
		"# screenshot; the test fails when a page no longer matches. Written by\n" +
		"# UPDATE_SCREENSHOTS=1 go test ./service/settings -run InBrowser.\n")
	for _, name := range names {
		out.WriteString("\n## " + name + "\n")
		for _, line := range s.taken[name] {
			out.WriteString(line + "\n")
		}
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, outlineFile), []byte(out.String()), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// violation is one rule axe-core found broken.
type violation struct {
	ID, Impact, Help string
	Nodes            []struct{ Target []string }
}

// axeRun runs axe-core on the page and returns what it found.
func (b tab) axeRun(source string) []violation {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	// DevTools evaluation is not bound by the page's CSP, which allows no
	// script but the page's own.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](source)); err != nil {
		b.t.Fatalf("inject axe-core: %v", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]violation](
		`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations)`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("run axe-core: %v", err)
	}
	return out
}

// axe fails the test on a serious or critical violation of the page.
func (b tab) axe(source, page string) {
	b.t.Helper()
	for _, v := range b.axeRun(source) {
		if v.Impact == "serious" || v.Impact == "critical" {
			b.t.Errorf("axe-core on %s: %s (%s): %s, at %v", page, v.ID, v.Impact, v.Help, v.Nodes)
		} else {
			b.t.Logf("axe-core on %s, %s: %s: %s", page, v.Impact, v.ID, v.Help)
		}
	}
}

// TestAxeFindsViolations: the accessibility check can fail: on a page
// with an unlabelled field and a nameless button it finds them.
func TestAxeFindsViolations(t *testing.T) {
	ctx := newBrowserTab(t)
	source := axeSource(t)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html lang="en"><title>Bad</title><h1>Bad</h1><form><input type="text"><button></button></form>`)
	}))
	defer bad.Close()
	b := tab{t: t, ctx: ctx}
	b.open(bad.URL)
	b.waitHeading("Bad")
	found := map[string]string{}
	for _, v := range b.axeRun(source) {
		found[v.ID] = v.Impact
	}
	if found["label"] != "critical" || found["button-name"] != "critical" {
		t.Fatalf("axe-core found %v, want label and button-name, critical", found)
	}
}

// tokenStatus asks the real token endpoint for a token with a client's
// credentials: the status, the granted scope and the token.
func tokenStatus(t *testing.T, h *servertest.Harness, id, secret string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.Public.URL+"/api/oauth/token", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		Scope       string `json:"scope"`
	}
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &body)
	return res.StatusCode, body.Scope, body.AccessToken
}

// TestSettingsPageInBrowser walks the page as a member does, in chromium:
// sign in with a link, create a client with two scopes by keyboard and
// read its secret, use it, find it nowhere afterwards (a reload of the
// secret's page, Back to it, the other pages, the addresses), rotate
// (a reload rotates nothing), disable a webhook endpoint, deactivate,
// activate, revoke, read the audit log, sign out; a reused or expired
// link, and a member who lost access, are refused. axe-core checks the
// clients page, the create form and the client's page. It takes the
// screenshots in docs/settings/ (see screenshots).
func TestSettingsPageInBrowser(t *testing.T) {
	ctx := newBrowserTab(t)
	axe := axeSource(t)
	shots := newScreenshots(t)
	h := servertest.New(t)
	ws, member := h.Workspace("Acme Browser")
	b := tab{t: t, ctx: ctx}

	// Sign in with a link.
	link := signInLink(t, h, member, 0)
	b.open(link)
	b.waitHeading("API clients")
	if loc := evalIn[string](b, `location.pathname + location.search`); loc != "/settings/" {
		t.Fatalf("after sign-in the page is %q, want /settings/ (the code out of the address bar)", loc)
	}
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{h.Admin.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cookies.Cookies) != 1 || !cookies.Cookies[0].HTTPOnly || cookies.Cookies[0].SameSite != network.CookieSameSiteStrict {
		t.Fatalf("cookies %+v: want one, HttpOnly, SameSite=Strict", cookies.Cookies)
	}
	if evalIn[string](b, `document.cookie`) != "" {
		t.Fatal("the session cookie is readable from script")
	}
	if !b.has("table", "API clients") {
		t.Fatal(`no table named "API clients"`)
	}

	// The create form: every scope the server knows, labelled by name; an
	// error is shown next to its field.
	b.click("link", "Create API client")
	b.waitHeading("Create API client")
	b.find("textbox", "Name")
	b.find("spinbutton", "Read rate")
	b.find("spinbutton", "Write rate")
	// One checkbox per known scope, named by the scope, and no other.
	for _, s := range scope.Names() {
		b.find("checkbox", s)
	}
	if n := len(b.query("checkbox", "")); n != len(scope.Names()) {
		t.Fatalf("%d checkboxes, want one per scope (%v)", n, scope.Names())
	}
	b.axe(axe, "the create form")
	shots.take(b, "create")
	// No name, a bad rate, no scope: every error at once, each next to
	// its field (TestCreateFormShowsEveryErrorInBrowser has the details).
	b.call(b.find("spinbutton", "Read rate"), `function () { this.value = "0"; }`)
	b.click("button", "Create API client")
	b.waitFor("the errors", `document.getElementById("name-error") !== null && document.getElementById("read-rate-error") !== null && document.getElementById("scopes-error") !== null`)
	described := evalIn[string](b, `(() => { const f = document.getElementById("name"); const e = document.getElementById(f.getAttribute("aria-describedby")); return f.getAttribute("aria-invalid") + " " + (e ? e.textContent : ""); })()`)
	if !strings.HasPrefix(described, "true The name must be") {
		t.Fatalf("an empty name: the Name field says %q, want aria-invalid and its error next to it", described)
	}
	b.axe(axe, "the create form with errors")
	shots.take(b, "create-errors")
	// With a name and the rate cleared but no scope, the scopes alone say
	// so, next to them.
	b.call(b.find("textbox", "Name"), `function () { this.value = "Reporting sync"; }`)
	b.call(b.find("spinbutton", "Read rate"), `function () { this.value = ""; }`)
	b.click("button", "Create API client")
	b.waitFor("the scopes' error", `document.getElementById("scopes-error") !== null && document.getElementById("name-error") === null && document.getElementById("read-rate-error") === null`)
	scopesError := evalIn[string](b, `(() => { const f = document.querySelector("fieldset"); const e = document.getElementById(f.getAttribute("aria-describedby")); return e ? e.textContent : ""; })()`)
	if scopesError != "Choose at least one scope." {
		t.Fatalf("no scope: the scopes say %q", scopesError)
	}

	// Create by keyboard: the name, then Tab and Space through the scope
	// checkboxes (contacts:read, and leads:write three further), Enter.
	b.call(b.find("textbox", "Name"), `function () { this.focus(); this.select(); }`)
	b.run("type the form",
		chromedp.KeyEvent("Reporting sync"),
		chromedp.KeyEvent("\t"), chromedp.KeyEvent(" "),
		chromedp.KeyEvent("\t"), chromedp.KeyEvent("\t"), chromedp.KeyEvent("\t"), chromedp.KeyEvent(" "))
	checked := evalIn[[]string](b, `[...document.querySelectorAll("input[type=checkbox]:checked")].map(c => c.value)`)
	if strings.Join(checked, " ") != "contacts:read leads:write" {
		t.Fatalf("checked by keyboard: %v, want contacts:read and leads:write", checked)
	}
	b.call(b.find("textbox", "Name"), `function () { this.focus(); }`)
	b.run("submit with Enter", chromedp.KeyEvent("\r"))
	b.waitHeading("API client created")
	secret := b.value("textbox", "Client secret")
	if !strings.HasPrefix(secret, "svcs_") {
		t.Fatalf("Client secret field holds %q", secret)
	}
	if evalIn[bool](b, `document.getElementById("client-secret").readOnly`) != true {
		t.Fatal("the Client secret field is not read-only")
	}
	if !strings.Contains(b.html(), "will not be shown again") {
		t.Fatal("no warning that the secret will not be shown again")
	}
	clientID := evalIn[string](b, `document.querySelector("dd code").textContent`)
	shots.take(b, "secret")
	b.click("button", "Copy")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("copy-status").textContent !== ""`, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatalf("Copy said nothing: %v", err)
	}

	// The secret gets a token with exactly those scopes.
	status, scope, _ := tokenStatus(t, h, clientID, secret)
	if status != http.StatusOK || scope != "contacts:read leads:write" {
		t.Fatalf("token with the page's secret: status %d scope %q, want 200 \"contacts:read leads:write\"", status, scope)
	}

	// Left (pagehide), the page empties its secret field, so a copy the
	// browser keeps for Back has no secret.
	if got := evalIn[string](b, `window.dispatchEvent(new PageTransitionEvent("pagehide", {persisted: true})), document.getElementById("client-secret").value`); got != "" {
		t.Fatalf("after pagehide the Client secret field holds %q, want it empty", got)
	}

	// Afterwards the secret is nowhere. A reload of its page sends the
	// form again (headless chromium does not ask first): it creates no
	// second client and shows no secret.
	b.run("reload the secret's page", chromedp.Reload())
	b.waitHeading("Already done")
	if strings.Contains(b.html(), secret) || b.has("textbox", "Client secret") {
		t.Fatal("a reload of the secret's page shows a secret")
	}
	if n := clientCount(t, h, ws, member); n != 1 {
		t.Fatalf("after a reload of the secret's page %d clients, want 1", n)
	}
	// Not on the clients page, not after Back to the secret's page, not
	// on the client's page after a reload, in no address of the history.
	b.open(h.Admin.URL + "/settings/")
	b.waitHeading("API clients")
	if err := chromedp.Do(ctx, chromedp.NavigateBack()); err != nil {
		t.Logf("Back: %v", err) // net::ERR_CACHE_MISS: the answer was not stored
	}
	b.waitFor("Back", `true`)
	if strings.Contains(b.html(), secret) {
		t.Fatal("Back shows the secret")
	}
	if n := clientCount(t, h, ws, member); n != 1 {
		t.Fatalf("after Back %d clients, want 1", n)
	}
	b.open(h.Admin.URL + "/settings/")
	b.waitHeading("API clients")
	b.run("reload", chromedp.Reload())
	b.waitHeading("API clients")
	if strings.Contains(b.html(), secret) {
		t.Fatal("the clients page shows the secret")
	}
	b.axe(axe, "the clients page")
	shots.take(b, "clients")
	endpoint := seedEndpoint(t, h, ws, clientID, "https://hooks.example.com/partner")
	seedAttempts(t, h, endpoint)
	b.click("link", "Reporting sync")
	b.waitHeading("Reporting sync")
	b.run("reload", chromedp.Reload())
	b.waitHeading("Reporting sync")
	if strings.Contains(b.html(), secret) {
		t.Fatal("the client's page shows the secret")
	}
	b.axe(axe, "the client's page")
	history, err := chromedp.Run(ctx, chromedp.NavigationEntries())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range history.Entries {
		if strings.Contains(e.URL, secret) {
			t.Fatalf("the secret is in an address: %s", e.URL)
		}
	}
	shots.take(b, "client")

	// The client's webhook endpoint: "Disable" asks first; "Enable"
	// undoes it.
	b.click("link", "Disable")
	b.waitHeading("Disable a webhook endpoint of Reporting sync?")
	b.axe(axe, "the confirmation of Disable")
	shots.take(b, "disable-webhook")
	if st := endpointStatus(t, h, endpoint); st != "enabled" {
		t.Fatalf("the endpoint after the confirmation opened: %s, want enabled (nothing done yet)", st)
	}
	b.click("button", "Disable")
	b.waitPage("Reporting sync", "The webhook endpoint is disabled")
	if b.has("link", "Disable") || !strings.Contains(b.html(), "disabled (admin)") {
		t.Fatal(`after "Disable" the endpoint is not shown disabled`)
	}
	if st := endpointStatus(t, h, endpoint); st != "disabled admin" {
		t.Fatalf("the endpoint after Disable: %s, want disabled admin", st)
	}
	b.click("button", "Enable")
	b.waitPage("Reporting sync", "The webhook endpoint is enabled again")
	if st := endpointStatus(t, h, endpoint); st != "enabled" {
		t.Fatalf("the endpoint after Enable: %s, want enabled", st)
	}
	b.find("link", "Disable")

	// Deactivate and activate.
	b.click("button", "Deactivate")
	b.waitPage("Reporting sync", "The client is deactivated")
	if status, _, _ := tokenStatus(t, h, clientID, secret); status == http.StatusOK {
		t.Fatal("a deactivated client got a token")
	}
	b.click("button", "Activate")
	b.waitPage("Reporting sync", "The client is active again")
	if status, _, _ := tokenStatus(t, h, clientID, secret); status != http.StatusOK {
		t.Fatalf("an activated client: token status %d", status)
	}

	// Rotate: confirm, then the new secret once; the old one is refused.
	b.click("link", "Rotate secret")
	b.waitHeading("Rotate the secret of Reporting sync?")
	shots.take(b, "rotate")
	b.click("button", "Rotate secret")
	b.waitHeading("Secret rotated")
	rotated := b.value("textbox", "Client secret")
	if rotated == secret || !strings.HasPrefix(rotated, "svcs_") {
		t.Fatalf("rotated secret %q", rotated)
	}
	if status, _, _ := tokenStatus(t, h, clientID, secret); status != http.StatusUnauthorized {
		t.Fatalf("the old secret after rotation: status %d, want 401", status)
	}
	// A reload of the new secret's page rotates nothing.
	b.run("reload the rotated secret's page", chromedp.Reload())
	b.waitHeading("Already done")
	if strings.Contains(b.html(), rotated) || b.has("textbox", "Client secret") {
		t.Fatal("a reload of the rotated secret's page shows a secret")
	}
	status, _, token := tokenStatus(t, h, clientID, rotated)
	if status != http.StatusOK {
		t.Fatalf("the new secret (after a reload of its page): status %d, want 200", status)
	}
	if status, _, _ := h.Do("GET", "/api/v1/contacts", token, "", ""); status != http.StatusOK {
		t.Fatalf("the new secret's token: status %d, want 200", status)
	}

	// Revoke: confirm; the client's token stops working.
	b.open(h.Admin.URL + "/settings/clients/" + clientID)
	b.waitHeading("Reporting sync")
	b.click("link", "Revoke")
	b.waitHeading("Revoke Reporting sync?")
	shots.take(b, "revoke")
	b.click("button", "Revoke")
	b.waitPage("Reporting sync", "The client is revoked")
	if status, _, _ := h.Do("GET", "/api/v1/contacts", token, "", ""); status != http.StatusUnauthorized {
		t.Fatalf("a revoked client's token: status %d, want 401", status)
	}
	if b.has("button", "Activate") || b.has("link", "Rotate secret") {
		t.Fatal("a revoked client still offers Activate or Rotate secret")
	}

	// The audit log, newest first, the changes alone, with the member's
	// email beside their id as the actor (TestAuditLogInBrowser has the
	// filters).
	b.click("link", "Audit log")
	b.waitHeading("Audit log")
	if !b.has("table", "Audit log") {
		t.Fatal(`no table named "Audit log"`)
	}
	first := evalIn[[]string](b, `[...document.querySelectorAll("tbody tr")].slice(0, 1).map(r => r.cells[1].textContent + " " + r.cells[3].innerText.replace(/\s+/g, " ").trim())`)
	// The revoke disabled the client's webhook endpoints too, in its
	// transaction.
	if len(first) != 1 || first[0] != "api_client.disable_webhooks admin@acme-browser.test "+member {
		t.Fatalf("audit log starts %v, want the member's revoke, by their email and id", first)
	}
	table := evalIn[string](b, `document.querySelector("table").textContent`)
	if !strings.Contains(table, "api_client.rotate_secret") || !strings.Contains(table, "api_client.create") || strings.Contains(table, "api_client.list") {
		t.Fatal("the audit log lacks the page's changes, or shows its reads by default")
	}
	b.axe(axe, "the audit log")
	shots.take(b, "audit")

	// The custom fields page, with a field of each object, its add form
	// and a delete's confirmation (TestCustomFieldsPageInBrowser has the
	// rules).
	for _, f := range []*customfieldv1.CustomField{
		{Object: "contact", Key: "renewal_date", Label: "Renewal date", Type: "date", Description: servertest.Ptr("When their contract renews")},
		{Object: "lead", Key: "budget_band", Label: "Budget band", Type: "select", Required: servertest.Ptr(true), Options: []*customfieldv1.CustomFieldOption{
			{Value: "low", Label: "Under 1,000"}, {Value: "mid", Label: "1,000 to 10,000"}, {Value: "high", Label: "Over 10,000"}}},
	} {
		if _, err := h.AdminClient.CreateCustomField(context.Background(), connect.NewRequest(&adminv1.CreateCustomFieldRequest{
			WorkspaceId: ws, MemberId: member, CustomField: f})); err != nil {
			t.Fatal(err)
		}
	}
	b.click("link", "Custom fields")
	b.waitHeading("Custom fields")
	shots.take(b, "fields")
	b.click("link", "Add custom field")
	b.waitHeading("Add custom field")
	shots.take(b, "field-add")
	b.click("link", "Cancel")
	b.waitHeading("Custom fields")
	b.click("link", "Delete Budget band")
	b.waitHeading("Delete Budget band?")
	shots.take(b, "field-delete")

	// A member who lost access is refused at the next request.
	setAccess := func(on bool) {
		if _, err := h.AdminClient.SetMemberSettingsAccess(context.Background(), connect.NewRequest(&adminv1.SetMemberSettingsAccessRequest{MemberId: member, SettingsAccess: on})); err != nil {
			t.Fatal(err)
		}
	}
	setAccess(false)
	b.click("link", "API clients")
	b.waitHeading("No settings access")
	setAccess(true)

	// A reused link does not sign in; an expired one neither.
	b.open(link)
	b.waitHeading("This sign-in link does not work")
	shots.take(b, "link-refused")
	b.open(h.Admin.URL + "/settings/")
	b.waitHeading("You are signed out")
	expired := signInLink(t, h, member, time.Minute)
	h.Clock.Advance(time.Minute + time.Second)
	b.open(expired)
	b.waitHeading("This sign-in link does not work")

	// Sign out ends the session.
	b.open(signInLink(t, h, member, 0))
	b.waitHeading("API clients")
	b.click("button", "Sign out")
	b.waitHeading("Signed out")
	b.open(h.Admin.URL + "/settings/")
	b.waitHeading("You are signed out")

	if n := clientCount(t, h, ws, member); n != 1 {
		t.Fatalf("%d clients, want the 1 the page created", n)
	}
}

// TestSettingsFromTheCRM follows a sign-in link from another site, as the
// CRM gives it: the SameSite=Strict cookie is not sent on that site's
// navigation, so the page must get to the clients page by a navigation
// of its own. And a form another site serves, with a stolen CSRF token,
// is refused.
func TestSettingsFromTheCRM(t *testing.T) {
	ctx := newBrowserTab(t)
	h := servertest.New(t)
	ws, member := h.Workspace("From CRM")
	b := tab{t: t, ctx: ctx}
	// The CRM: another site (localhost, where the admin listener is
	// 127.0.0.1), with a link to a fresh sign-in link.
	var token string
	crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/":
			fmt.Fprintf(w, `<!doctype html><html lang="en"><title>CRM</title><h1>CRM</h1><a href="%s">Open workspace settings</a>`, signInLinkFor(h, member))
		case "/evil":
			fmt.Fprintf(w, `<!doctype html><html lang="en"><title>Evil</title><h1>Evil</h1><form method="post" action="%s/settings/clients">
<input type="hidden" name="csrf" value="%s"><input type="hidden" name="name" value="evil"><input type="hidden" name="scope" value="contacts:read">
<button type="submit">Win a prize</button></form>`, h.Admin.URL, token)
		}
	}))
	defer crm.Close()
	crmURL := strings.Replace(crm.URL, "127.0.0.1", "localhost", 1)
	b.open(crmURL + "/")
	b.waitHeading("CRM")
	b.click("link", "Open workspace settings")
	b.waitHeading("API clients")

	// A form of another site, even with the member's CSRF token.
	b.click("link", "Create API client")
	b.waitHeading("Create API client")
	token = evalIn[string](b, `document.querySelector("input[name=csrf]").value`)
	b.open(crmURL + "/evil")
	b.waitHeading("Evil")
	b.click("button", "Win a prize")
	b.waitHeading("Request refused")
	if n := clientCount(t, h, ws, member); n != 0 {
		t.Fatalf("another site's form created %d clients", n)
	}
}

// signInLinkFor is signInLink for a handler, which must not fail the test
// from its goroutine.
func signInLinkFor(h *servertest.Harness, member string) string {
	res, err := h.AdminClient.CreateSignInLink(context.Background(), connect.NewRequest(&adminv1.CreateSignInLinkRequest{MemberId: member}))
	if err != nil {
		return "about:blank#" + url.PathEscape(err.Error())
	}
	return res.Msg.GetUrl()
}

// seedEndpoint adds a webhook endpoint to a client, as the webhooks API
// would (its own tests cover that API), and returns its id.
func seedEndpoint(t *testing.T, h *servertest.Harness, ws, client, u string) uuid.UUID {
	t.Helper()
	wsID, _ := opaqueid.Parse(opaqueid.Workspace, ws)
	cid, _ := opaqueid.Parse(opaqueid.Client, client)
	id := uuid.Must(uuid.NewV7())
	if _, err := dbtest.Raw(t, h.DB).Exec(context.Background(), `INSERT INTO webhook_endpoints
		(workspace_id, id, client_id, url, event_types, secret, after_xid, after_seq)
		VALUES ($1, $2, $3, $4, '{lead.created}', 'whsec_c2VjcmV0LW5ldmVyLXNob3du', 0, 0)`, wsID, id, cid, u); err != nil {
		t.Fatalf("seed webhook endpoint: %v", err)
	}
	return id
}

// endpointStatus is an endpoint's status and disabled reason.
func endpointStatus(t *testing.T, h *servertest.Harness, id uuid.UUID) string {
	t.Helper()
	var st string
	var reason *string
	if err := dbtest.Raw(t, h.DB).QueryRow(context.Background(), `SELECT status, disabled_reason FROM webhook_endpoints WHERE id = $1`, id).Scan(&st, &reason); err != nil {
		t.Fatal(err)
	}
	if reason != nil {
		st += " " + *reason
	}
	return st
}
