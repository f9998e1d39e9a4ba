package server_test

import (
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// Tests from the adversarial review of the limits (issue 9's follow-up):
// each failed on the code before its fix.

// concurrentTokenRequests sends n token requests at once over one HTTP/2
// connection, request i built by form(i) with X-Forwarded-For from(i),
// and counts the answers by status.
func concurrentTokenRequests(t *testing.T, h *servertest.Harness, n int, form func(i int) url.Values, from func(i int) string) map[int]int {
	t.Helper()
	client := h.HTTP2Client()
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	statuses := map[int]int{}
	var errs []error
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, h.Public.URL+"/api/oauth/token", strings.NewReader(form(i).Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-For", from(i))
			ready.Done()
			<-start
			res, err := client.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			res.Body.Close()
			statuses[res.StatusCode]++
		})
	}
	ready.Wait()
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d transport errors, first %v", len(errs), errs[0])
	}
	return statuses
}

// limitsHarness runs a server with 3 failed authentications per minute
// per client id and source (90 per source), trusting loopback as a proxy
// so that the test picks each request's source with X-Forwarded-For. Its
// limiter clock stands still: nothing refills while the requests run,
// however slowly (under -race, 300 requests took 3.5 s, and the source's
// bucket refilled enough to let the right secret through).
func limitsHarness(t *testing.T, noCache bool) *servertest.Harness {
	clock := newLimiterClock()
	return servertest.New(t, servertest.Options{Config: func(c *server.Config) {
		limits := ratelimit.DefaultConfig()
		limits.AuthFailures = 3
		limits.Now = clock.Now
		c.Limits = &limits
		c.NoTokenCache = noCache
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}})
}

// TestConcurrentFailuresStayWithinTheBudget: the failed-authentication
// buckets were checked when a request arrived and spent when its secret
// had failed, so every request arriving while others were still being
// checked passed the check: 300 concurrent guesses from one source, each
// naming another unknown client id, were all answered 401 against a
// budget of 90, and 100 concurrent guesses at one client id from one
// source (on a replica that is not caching, so each looks the client up)
// 99 times 401 against a budget of 3. A request about to check a secret
// now holds a place in both buckets until it knows the outcome. The
// client id stays served from other sources.
func TestConcurrentFailuresStayWithinTheBudget(t *testing.T) {
	t.Parallel()
	t.Run("source", func(t *testing.T) {
		t.Parallel()
		h := limitsHarness(t, false)
		ws, m := h.Workspace("Concurrent Source Co")
		id, sec := h.Client(ws, m, "contacts:read")
		got := concurrentTokenRequests(t, h, 300, func(int) url.Values {
			return url.Values{"grant_type": {"client_credentials"}, "client_id": {opaqueid.Format(opaqueid.Client, opaqueid.New())},
				"client_secret": {"guess"}}
		}, func(int) string { return "203.0.113.50" })
		// 90: nothing refills on the still clock.
		if got[401] != 90 || got[401]+got[429] != 300 {
			t.Fatalf("answers %v: more than the source's 90 failures checked", got)
		}
		s, _, b := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded",
			"grant_type=client_credentials", "Authorization", basicHeader(id, sec), "X-Forwarded-For", "203.0.113.50")
		if s != 429 {
			t.Fatalf("right secret from the locked source: %d %s", s, b)
		}
	})
	t.Run("client id", func(t *testing.T) {
		t.Parallel()
		h := limitsHarness(t, true)
		ws, m := h.Workspace("Concurrent Client Co")
		id, sec := h.Client(ws, m, "contacts:read")
		got := concurrentTokenRequests(t, h, 100, func(i int) url.Values {
			return url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {"guess" + strconv.Itoa(i)}}
		}, func(int) string { return "198.51.100.1" })
		// 3: nothing refills on the still clock.
		if got[401] != 3 || got[401]+got[429] != 100 {
			t.Fatalf("answers %v: more than the client id's 3 failures at one source checked", got)
		}
		right := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode()
		s, _, b := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", right,
			"X-Forwarded-For", "198.51.100.1")
		if s != 429 {
			t.Fatalf("right secret of the client id locked at this source: %d %s", s, b)
		}
		s, _, b = h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", right,
			"X-Forwarded-For", "192.0.2.200")
		if s != 200 {
			t.Fatalf("right secret of the client id from another source: %d %s", s, b)
		}
	})
}

// rateHeadersPresent reports whether both draft-11 headers are set.
func rateHeadersPresent(h http.Header) bool {
	return h.Get("RateLimit-Policy") != "" && h.Get("RateLimit") != ""
}

// TestInsufficientScopeIsLimited: a token without the route's scope was
// answered 403 before its client's bucket was looked at, so the answer
// had no RateLimit headers (product.md: every /api/v1 response, errors
// included) and a client could send such requests without limit. The 403
// now spends from the bucket like any other answer to a valid token.
func TestInsufficientScopeIsLimited(t *testing.T) {
	t.Parallel()
	h, _ := clockedHarness(t)
	ws, m := h.Workspace("Scope Limit Co")
	id, sec := h.ClientWithRates(ws, m, 1, 1, "contacts:read")
	tok := h.Token(id, sec, "contacts:read")
	s, hdr, b := h.Do(http.MethodGet, "/api/v1/leads", tok, "", "")
	if s != 403 || !rateHeadersPresent(hdr) {
		t.Fatalf("403 without RateLimit headers: %d %v %s", s, hdr, b)
	}
	if bucket, q, _, r, _ := rateHeaders(t, hdr); bucket != "read" || q != 2 || r != 1 {
		t.Fatalf("403 headers: %s q=%d r=%d", bucket, q, r)
	}
	n, hdr, b := untilRefusedOr(t, 403, func() (int, http.Header, []byte) {
		return h.Do(http.MethodPost, "/api/v1/leads/batch", tok, "application/json", `{"leads":[{"contactId":"con_x"}]}`)
	})
	if n != 1 { // the clock stands still
		t.Errorf("%d forbidden writes served with a write burst of 2 (one spent by the token), want 1", n)
	}
	if p := decode(t, b); p["code"] != "rate_limited" {
		t.Fatalf("429 body %s", b)
	}
	if bucket, _, _, _, _ := rateHeaders(t, hdr); bucket != "write" {
		t.Fatalf("a forbidden batch spent from %s", bucket)
	}
	retryAfter(t, hdr)
}

// untilRefusedOr is untilRefused for requests whose answer before the
// refusal is ok rather than a success.
func untilRefusedOr(t *testing.T, ok int, do func() (int, http.Header, []byte)) (int, http.Header, []byte) {
	t.Helper()
	for n := 0; n < 50; n++ {
		s, hdr, b := do()
		if s == http.StatusTooManyRequests {
			return n, hdr, b
		}
		if s != ok {
			t.Fatalf("request %d: %d %s", n, s, b)
		}
		if !rateHeadersPresent(hdr) {
			t.Fatalf("request %d: %d without RateLimit headers", n, s)
		}
	}
	t.Fatal("never refused")
	return 0, nil, nil
}

// TestInvalidUTF8InAPathIsAClientError: a path variable that is not
// valid UTF-8 reached the transcoder, which could not put it in a string
// field: 500, and on the admin listener the protobuf library's message
// ("proto: field partner.admin.v1.… contains invalid UTF-8").
func TestInvalidUTF8InAPathIsAClientError(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Path Bytes Co")
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/contacts/%FF", ""},
		{http.MethodGet, "/api/v1/leads/lea_%C3", ""},
		{http.MethodPatch, "/api/v1/contacts/%FF", `{"firstName":"x"}`},
		{http.MethodPatch, "/api/v1/leads/%FE%FF", `{"status":"new"}`},
		{http.MethodGet, "/api/v1/contacts/%00", ""},
		{http.MethodPatch, "/api/v1/leads/a%00", `{"status":"new"}`},
	} {
		s, hdr, b := h.Do(tc.method, tc.path, tn.Token, "application/json", tc.body)
		problemField(t, s, hdr, b, 400, "malformed_request", "id")
		if !rateHeadersPresent(hdr) {
			t.Errorf("%s %s: no RateLimit headers", tc.method, tc.path)
		}
	}
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/admin/v1/workspaces/%FF/clients?memberId=mem_x", ""},
		{http.MethodPost, "/admin/v1/clients/%FF:rotateSecret", `{"memberId":"mem_x"}`},
		{http.MethodPost, "/admin/v1/workspaces/%FF/members", `{"email":"a@b.co"}`},
	} {
		req, _ := http.NewRequest(tc.method, h.Admin.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Code    any    `json:"code"`
			Message string `json:"message"`
			Detail  string `json:"detail"`
		}
		readJSON(t, res, &body)
		if res.StatusCode != 400 || strings.Contains(body.Message+body.Detail, "proto") {
			t.Errorf("admin %s %s: %d %+v", tc.method, tc.path, res.StatusCode, body)
		}
	}
}

// readJSON decodes a response body and closes it.
func readJSON(t *testing.T, res *http.Response, v any) {
	t.Helper()
	defer res.Body.Close()
	b := new(strings.Builder)
	if _, err := io.Copy(b, res.Body); err != nil {
		t.Fatal(err)
	}
	mustUnmarshal(t, []byte(b.String()), v)
}

// streamedBody hides a body's length from net/http, which then sends it
// chunked (HTTP/1.1) or without Content-Length (HTTP/2).
type streamedBody struct{ r io.Reader }

func (s streamedBody) Read(p []byte) (int, error) { return s.r.Read(p) }

// TestOversizedBodyWithoutLengthIs413OverConnect: a Connect unary body
// over 1 MiB sent without Content-Length got past the declared-size check
// and was cut off by the wire cap inside connect-go, which answered 429
// (the Connect protocol's status for ResourceExhausted, which says "slow
// down") with its own words: "message is larger than configured max
// 1048576 - unable to determine message size: http: request body too
// large". It is the 413 payload_too_large every other surface answers.
func TestOversizedBodyWithoutLengthIs413OverConnect(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Streamed Body Co")
	big := strings.Repeat("a", 2<<20)
	for _, tc := range []struct {
		name, base, path, body string
		auth                   string
	}{
		{"public", h.Public.URL, "/partner.contact.v1.ContactService/CreateContact", `{"contact":{"email":"a@b.co","firstName":"` + big + `"}}`, "Bearer " + tn.Token},
		{"token", h.Public.URL, "/partner.token.v1.TokenService/CreateToken", `{"grantType":"client_credentials","scope":"` + big + `"}`, basicHeader(tn.ClientID, tn.ClientSecret)},
		{"admin", h.Admin.URL, "/partner.admin.v1.AdminService/CreateWorkspace", `{"name":"` + big + `"}`, ""},
	} {
		for _, client := range []*http.Client{http.DefaultClient, h.HTTP2Client()} {
			req, _ := http.NewRequest(http.MethodPost, tc.base+tc.path, streamedBody{strings.NewReader(tc.body)})
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Connect-Protocol-Version", "1")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ Code, Message string }
			readJSON(t, res, &body)
			if res.StatusCode != 413 || body.Code != "resource_exhausted" || !strings.HasPrefix(body.Message, "payload_too_large: ") {
				t.Errorf("%s over %s: %d %+v", tc.name, res.Proto, res.StatusCode, body)
			}
		}
	}
}

// TestRepeatedAndEmptyPreconditionHeaders: only the first If-Match and
// the first Idempotency-Key field lines were read. An empty If-Match
// before a stale one applied the update unconditionally; a stale tag
// before the current one was refused (the lines are one list, RFC 9110
// §5.3); two Idempotency-Keys used the first, which a proxy in between
// may not have; an empty one was no key at all, so a retried create was
// unguarded. Now: the If-Match lines are one list, an empty one matches
// nothing, and a repeated or empty Idempotency-Key is a 400.
func TestRepeatedAndEmptyPreconditionHeaders(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Repeated Headers Co")
	s, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"first@example.com"}`)
	if s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	path := "/api/v1/contacts/" + servertest.ID(t, b)
	current := hdr.Get("ETag")
	send := func(method, path, body string, header string, values ...string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(method, h.Public.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header[header] = values
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, out
	}
	for _, tc := range []struct {
		lines []string
		want  int
	}{
		{[]string{"", `"stale"`}, 412},
		{[]string{""}, 412},
		{[]string{`"stale"`, current}, 200},
	} {
		if s, _, b := send(http.MethodPatch, path, `{"firstName":"Ada"}`, "If-Match", tc.lines...); s != tc.want {
			t.Fatalf("If-Match lines %q: %d %s", tc.lines, s, b)
		}
	}
	for _, tc := range []struct{ path, body string }{
		{"/api/v1/contacts", `{"email":"keyed@example.com"}`},
		{"/api/v1/leads", `{"contact":{"email":"keyed@example.com"}}`},
		{"/api/v1/contacts/batch", `{"contacts":[{"email":"keyed-batch@example.com"}]}`},
		{"/api/v1/leads/batch", `{"leads":[{"contact":{"email":"keyed-batch@example.com"}}]}`},
	} {
		for _, keys := range [][]string{{"k1", "k2"}, {""}} {
			s, hdr, b := send(http.MethodPost, tc.path, tc.body, "Idempotency-Key", keys...)
			problemField(t, s, hdr, b, 400, "malformed_request", "Idempotency-Key")
		}
	}
	// Nothing was created by the refused requests.
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts?email=keyed%40example.com", tn.Token, "", ""); s != 200 || strings.Contains(string(b), "keyed@") {
		t.Fatalf("a refused create left a contact: %d %s", s, b)
	}
}
