package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	identityv1 "github.com/svat/partnerapi/gen/partner/identity/v1"
	"github.com/svat/partnerapi/gen/partner/identity/v1/identityv1connect"
	tokenv1 "github.com/svat/partnerapi/gen/partner/token/v1"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/internal/observe/metrics"
	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

var (
	policyRE = regexp.MustCompile(`^"(read|write)";q=(\d+);w=(\d+)$`)
	limitRE  = regexp.MustCompile(`^"(read|write)";r=(\d+);t=(\d+)$`)
)

// rateHeaders parses RateLimit-Policy and RateLimit, failing the test when
// either is missing or malformed or they name different buckets.
func rateHeaders(t *testing.T, h http.Header) (bucket string, q, w, r, reset int) {
	t.Helper()
	p := policyRE.FindStringSubmatch(h.Get("RateLimit-Policy"))
	l := limitRE.FindStringSubmatch(h.Get("RateLimit"))
	if p == nil || l == nil || p[1] != l[1] {
		t.Fatalf("RateLimit-Policy %q, RateLimit %q", h.Get("RateLimit-Policy"), h.Get("RateLimit"))
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	return p[1], atoi(p[2]), atoi(p[3]), atoi(l[2]), atoi(l[3])
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

func retryAfter(t *testing.T, h http.Header) time.Duration {
	t.Helper()
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n < 1 {
		t.Fatalf("Retry-After = %q, want whole seconds ≥ 1", h.Get("Retry-After"))
	}
	return time.Duration(n) * time.Second
}

// untilRefused repeats a request until it is refused with 429, and returns
// how many succeeded before. On a still limiter clock ([clockedHarness])
// nothing refills meanwhile, so the count is what was left of the burst.
func untilRefused(t *testing.T, do func() (int, http.Header, []byte)) (int, http.Header, []byte) {
	t.Helper()
	for n := 0; n < 50; n++ {
		s, hdr, b := do()
		if s == http.StatusTooManyRequests {
			return n, hdr, b
		}
		if s >= 300 && s != http.StatusUnprocessableEntity {
			t.Fatalf("request %d: %d %s", n, s, b)
		}
	}
	t.Fatal("never refused")
	return 0, nil, nil
}

// clockedHarness runs a server with the product's default rate limits on
// a limiter clock the test moves: a bucket refills only when the test
// says, however slowly the machine runs the requests.
func clockedHarness(t *testing.T) (*servertest.Harness, *limiterClock) {
	clock := newLimiterClock()
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) {
		limits := ratelimit.DefaultConfig()
		limits.Now = clock.Now
		c.Limits = &limits
	}})
	return h, clock
}

// TestReadBucket: GETs spend the client's read bucket; every answer
// carries the draft-11 headers; an empty bucket answers 429 problem+json
// with Retry-After; after Retry-After the client is served again.
func TestReadBucket(t *testing.T) {
	t.Parallel()
	h, clock := clockedHarness(t)
	ws, m := h.Workspace("Read Limit Co")
	id, sec := h.ClientWithRates(ws, m, 1, 0, "contacts:read")
	tok := h.Token(id, sec, "")

	s, hdr, b := h.Do(http.MethodGet, "/api/v1/me", tok, "", "")
	if s != 200 {
		t.Fatalf("%d %s", s, b)
	}
	// rate 1/s, burst 2: one spent, one left, full again in a second.
	if bucket, q, w, r, reset := rateHeaders(t, hdr); bucket != "read" || q != 2 || w != 2 || r != 1 || reset != 1 {
		t.Fatalf("headers after one request: %s q=%d w=%d r=%d t=%d", bucket, q, w, r, reset)
	}
	if hdr.Get("Retry-After") != "" {
		t.Errorf("Retry-After on a success: %q", hdr.Get("Retry-After"))
	}
	n, hdr, b := untilRefused(t, func() (int, http.Header, []byte) { return h.Do(http.MethodGet, "/api/v1/contacts", tok, "", "") })
	if n != 1 { // one left, and the clock stands still
		t.Errorf("%d requests served after the first with a burst of 2, want 1", n)
	}
	p := decode(t, b)
	if hdr.Get("Content-Type") != "application/problem+json" || p["code"] != "rate_limited" || p["status"] != float64(429) ||
		p["requestId"] != hdr.Get("Request-Id") {
		t.Fatalf("429 body %s", b)
	}
	if bucket, _, _, r, reset := rateHeaders(t, hdr); bucket != "read" || r != 0 || reset < 1 {
		t.Errorf("headers on the 429: %s r=%d t=%d", bucket, r, reset)
	}
	clock.Advance(retryAfter(t, hdr))
	if s, hdr, b := h.Do(http.MethodGet, "/api/v1/me", tok, "", ""); s != 200 {
		t.Fatalf("after Retry-After: %d %s", s, b)
	} else {
		rateHeaders(t, hdr)
	}

	// Errors of an identified client carry the headers too; an
	// unauthenticated request has no client and so no bucket.
	if s, hdr, _ := h.Do(http.MethodGet, "/api/v1/contacts?limit=0", tok, "", ""); s != 400 && s != 429 {
		t.Fatalf("bad limit: %d", s)
	} else if s == 400 {
		rateHeaders(t, hdr)
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if s, hdr, _ := h.Do(method, "/api/v1/nowhere", tok, "", ""); s != 404 && s != 429 {
			t.Fatalf("%s on no route: %d", method, s)
		} else if bucket, _, _, _, _ := rateHeaders(t, hdr); (bucket == "read") != (method == http.MethodGet) {
			t.Fatalf("%s on no route spent from %s", method, bucket)
		}
	}
	if _, hdr, _ := h.Do(http.MethodGet, "/api/v1/me", "", "", ""); hdr.Get("RateLimit") != "" {
		t.Errorf("RateLimit on an unauthenticated request: %q", hdr.Get("RateLimit"))
	}
}

// TestWriteBucket: creates spend the write bucket, not the read bucket;
// a validation failure is answered with the headers too.
func TestWriteBucket(t *testing.T) {
	t.Parallel()
	h, _ := clockedHarness(t)
	ws, m := h.Workspace("Write Limit Co")
	id, sec := h.ClientWithRates(ws, m, 1000, 1, "contacts:read", "contacts:write")
	tok := h.Token(id, sec, "")
	i := 0
	n, hdr, b := untilRefused(t, func() (int, http.Header, []byte) {
		i++
		s, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tok, "application/json", `{"email":"w`+strconv.Itoa(i)+`@example.com"}`)
		if s < 300 || s == 422 {
			if bucket, q, w, _, _ := rateHeaders(t, hdr); bucket != "write" || q != 2 || w != 2 {
				t.Fatalf("headers on a create: %s q=%d w=%d", bucket, q, w)
			}
		}
		return s, hdr, b
	})
	// The token request spent one write too.
	if n != 1 {
		t.Errorf("%d creates served with a burst of 2 after a token request, want 1", n)
	}
	if p := decode(t, b); p["code"] != "rate_limited" {
		t.Fatalf("429 body %s", b)
	}
	retryAfter(t, hdr)
	// Reads are still served: another bucket.
	if s, hdr, b := h.Do(http.MethodGet, "/api/v1/contacts", tok, "", ""); s != 200 {
		t.Fatalf("read while the write bucket is empty: %d %s", s, b)
	} else if bucket, _, _, _, _ := rateHeaders(t, hdr); bucket != "read" {
		t.Fatalf("bucket of a GET: %s", bucket)
	}
}

// TestRateLimitOverRPC: over Connect, gRPC and gRPC-Web a refusal is
// ResourceExhausted with ErrorInfo rate_limited and google.rpc.RetryInfo.
func TestRateLimitOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("RPC Limit Co")
	for name, opts := range map[string][]connect.ClientOption{"connect": nil, "grpc": {connect.WithGRPC()}, "grpc-web": {connect.WithGRPCWeb()}} {
		t.Run(name, func(t *testing.T) {
			id, sec := h.ClientWithRates(ws, m, 1, 1, "contacts:read", "contacts:write")
			tok := h.Token(id, sec, "")
			me := identityv1connect.NewIdentityServiceClient(h.HTTP2Client(), h.Public.URL, opts...)
			var err error
			for range 50 {
				req := connect.NewRequest(&identityv1.GetMeRequest{})
				req.Header().Set("Authorization", "Bearer "+tok)
				if _, err = me.GetMe(context.Background(), req); err != nil {
					break
				}
			}
			ce := assertConnectError(t, err, connect.CodeResourceExhausted, "rate_limited")
			var retry *errdetails.RetryInfo
			for _, d := range ce.Details() {
				if v, err := d.Value(); err == nil {
					if ri, ok := v.(*errdetails.RetryInfo); ok {
						retry = ri
					}
				}
			}
			if retry == nil || retry.GetRetryDelay().AsDuration() < time.Second {
				t.Fatalf("RetryInfo = %v", retry)
			}
			// Creates spend the write bucket over RPC too.
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, opts...)
			for i := range 50 {
				req := connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr("rpc" + strconv.Itoa(i) + "@" + name + ".test")}})
				req.Header().Set("Authorization", "Bearer "+tok)
				if _, err = c.CreateContact(context.Background(), req); err != nil {
					break
				}
			}
			assertConnectError(t, err, connect.CodeResourceExhausted, "rate_limited")
		})
	}
}

// TestTokenRequestsSpendTheWriteBucket: a successful token request is a
// write of its client, and token responses carry the write headers.
func TestTokenRequestsSpendTheWriteBucket(t *testing.T) {
	t.Parallel()
	h, clock := clockedHarness(t)
	ws, m := h.Workspace("Token Limit Co")
	id, sec := h.ClientWithRates(ws, m, 0, 1, "contacts:read")
	form := url.Values{"grant_type": {"client_credentials"}}.Encode()
	do := func() (int, http.Header, []byte) {
		return h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", form, "Authorization", basicHeader(id, sec))
	}
	s, hdr, b := do()
	if s != 200 {
		t.Fatalf("%d %s", s, b)
	}
	if bucket, q, w, r, _ := rateHeaders(t, hdr); bucket != "write" || q != 2 || w != 2 || r != 1 {
		t.Fatalf("token response headers: %s q=%d w=%d r=%d", bucket, q, w, r)
	}
	n, hdr, b := untilRefused(t, do)
	if n != 1 {
		t.Errorf("%d more tokens with a burst of 2, want 1", n)
	}
	body := decode(t, b)
	if body["error"] != "rate_limited" || body["error_description"] == "" || len(body) != 2 {
		t.Fatalf("429 body %s", b)
	}
	if hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control = %q", hdr.Get("Cache-Control"))
	}
	rateHeaders(t, hdr)
	clock.Advance(retryAfter(t, hdr))
	if s, _, b := do(); s != 200 {
		t.Fatalf("after Retry-After: %d %s", s, b)
	}
	// An identified client's error answer carries the headers too.
	s, hdr, _ = h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded",
		"grant_type=client_credentials&scope=leads:read", "Authorization", basicHeader(id, sec))
	if s != 400 {
		t.Fatalf("invalid scope: %d", s)
	}
	rateHeaders(t, hdr)
}

// failureHarness runs a server whose failed-authentication budget is 3
// per window per client id and source (90 per source), on a limiter clock
// the test moves, trusting loopback as a proxy so tests can choose their
// source with X-Forwarded-For.
func failureHarness(t *testing.T, logs *syncBuffer, window time.Duration) (*servertest.Harness, *limiterClock) {
	clock := newLimiterClock()
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) {
		limits := ratelimit.DefaultConfig()
		limits.AuthFailures, limits.AuthWindow, limits.Now = 3, window, clock.Now
		c.Limits = &limits
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		if logs != nil {
			c.Log = slog.New(slog.NewJSONHandler(logs, nil))
		}
	}})
	return h, clock
}

// TestFailedAuthenticationsLockTheClientIDAtTheirSource: once a client id
// has used up its failures at a source address, even its right secret
// from that address gets 429, on the token and the revocation endpoints,
// by Basic or in the body; from another address it is served; after
// Retry-After it works again everywhere. Each failure is logged without
// the secret and counted.
func TestFailedAuthenticationsLockTheClientIDAtTheirSource(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h, clock := failureHarness(t, &logs, 3*time.Second)
	ws, m := h.Workspace("Lockout Co")
	id, sec := h.Client(ws, m, "contacts:read")
	otherID, otherSec := h.Client(ws, m, "contacts:read")
	tok := h.Token(id, sec, "")
	wrong := sec[:len(sec)-4] + "abcd"
	token := func(id, sec string) (int, http.Header, []byte) {
		return h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded",
			url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode(),
			"X-Forwarded-For", "198.51.100.1")
	}
	before := counterValue(metrics.AuthFailures.WithLabelValues("wrong_secret"))
	limitedBefore := counterValue(metrics.RateLimited.WithLabelValues("auth_client"))
	for i := range 3 {
		if s, _, b := token(id, wrong); s != 401 {
			t.Fatalf("failure %d: %d %s", i, s, b)
		}
	}
	s, hdr, b := token(id, sec)
	if s != 429 {
		t.Fatalf("right secret while locked: %d %s", s, b)
	}
	if body := decode(t, b); body["error"] != "rate_limited" {
		t.Fatalf("body %s", b)
	}
	wait := retryAfter(t, hdr)
	// Basic, and the revocation endpoint, are refused the same way.
	if s, _, b := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", "grant_type=client_credentials",
		"Authorization", basicHeader(id, sec), "X-Forwarded-For", "198.51.100.1"); s != 429 {
		t.Fatalf("Basic while locked: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodPost, "/api/oauth/revoke", "", "application/x-www-form-urlencoded",
		url.Values{"token": {tok}, "client_id": {id}, "client_secret": {sec}}.Encode(), "X-Forwarded-For", "198.51.100.1"); s != 429 {
		t.Fatalf("revoke while locked: %d %s", s, b)
	}
	// The same client id from another source is served.
	if s, _, b := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", "grant_type=client_credentials",
		"Authorization", basicHeader(id, sec), "X-Forwarded-For", "198.51.100.2"); s != 200 {
		t.Fatalf("Basic from another source while locked at the first: %d %s", s, b)
	}
	// Another client from the same source is not affected.
	if s, _, b := token(otherID, otherSec); s != 200 {
		t.Fatalf("another client: %d %s", s, b)
	}
	if got := counterValue(metrics.AuthFailures.WithLabelValues("wrong_secret")) - before; got < 3 {
		t.Errorf("partner_auth_failures_total{reason=wrong_secret} grew by %v, want ≥ 3", got)
	}
	if got := counterValue(metrics.RateLimited.WithLabelValues("auth_client")) - limitedBefore; got < 3 {
		t.Errorf("partner_rate_limited_total{bucket=auth_client} grew by %v, want ≥ 3", got)
	}
	clock.Advance(wait)
	if s, _, b := token(id, sec); s != 200 {
		t.Fatalf("after Retry-After: %d %s", s, b)
	}

	out := logs.String()
	if !strings.Contains(out, `"msg":"client authentication failed"`) || !strings.Contains(out, `"client_id":"`+id+`"`) ||
		!strings.Contains(out, `"source":"198.51.100.1"`) || !strings.Contains(out, `"reason":"wrong_secret"`) {
		t.Fatalf("failed authentication not logged with client id, source and reason:\n%s", out)
	}
	for _, s := range []string{sec, wrong, otherSec} {
		if strings.Contains(out, s) {
			t.Fatal("the log contains a secret")
		}
	}
}

// TestFailedAuthenticationsLockTheSource: a source that fails 30 times the
// per-client budget across many client ids is refused for every client,
// even a right secret; X-Forwarded-For counts only from trusted proxies.
func TestFailedAuthenticationsLockTheSource(t *testing.T) {
	t.Parallel()
	// A minute's window on a still clock: nothing refills while the
	// failures below are sent.
	h, _ := failureHarness(t, nil, time.Minute)
	ws, m := h.Workspace("Source Lock Co")
	id, sec := h.Client(ws, m, "contacts:read")
	from := func(src, id, sec string) int {
		s, _, _ := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", "grant_type=client_credentials",
			"Authorization", basicHeader(id, sec), "X-Forwarded-For", "192.0.2.99, "+src)
		return s
	}
	// 90 failures (and a few for what refilled meanwhile), each on a
	// different unknown client id: no client id bucket empties, the
	// source's does.
	for i := range 96 {
		fake := "cli_" + strings.Repeat("0", 24) + strconv.Itoa(10+i)
		if s := from("203.0.113.7", fake, "nope"); (s != 401 || i >= 90) && (s != 429 || i < 90) {
			t.Fatalf("failure %d: %d", i, s)
		}
	}
	if s := from("203.0.113.7", id, sec); s != 429 {
		t.Fatalf("right secret from a locked source: %d", s)
	}
	if s := from("203.0.113.8", id, sec); s != 200 {
		t.Fatalf("right secret from another source: %d", s)
	}
}

// TestNewRatesApplyToIssuedTokensOnEveryReplica: set-rates on replica A
// changes the bucket of a token already cached on replica B within 5 s,
// and is audited.
func TestNewRatesApplyToIssuedTokensOnEveryReplica(t *testing.T) {
	t.Parallel()
	a := servertest.New(t)
	b := servertest.New(t, servertest.Options{DB: a.DB})
	ctx := context.Background()
	ws, m := a.Workspace("Rates Co")
	id, sec := a.Client(ws, m, "contacts:read")
	tok := b.Token(id, sec, "")
	if s, hdr, _ := b.Do(http.MethodGet, "/api/v1/me", tok, "", ""); s != 200 {
		t.Fatal(s)
	} else if _, q, _, _, _ := rateHeaders(t, hdr); q != 200 {
		t.Fatalf("default read burst = %d, want 200", q)
	}
	one := int32(1)
	res, err := a.AdminClient.SetApiClientRates(ctx, connect.NewRequest(&adminv1.SetApiClientRatesRequest{ClientId: id, MemberId: m, ReadRate: &one}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetClient().ReadRate == nil || res.Msg.GetClient().GetReadRate() != 1 || res.Msg.GetClient().WriteRate != nil {
		t.Fatalf("set-rates answered %v", res.Msg.GetClient())
	}
	dbtest.Eventually(t, 5*time.Second, "the new rate to reach replica B", func() bool {
		_, hdr, _ := b.Do(http.MethodGet, "/api/v1/me", tok, "", "")
		_, q, _, _, _ := rateHeaders(t, hdr)
		return q == 2
	})
	// 0 returns to the server default.
	zero := int32(0)
	res, err = a.AdminClient.SetApiClientRates(ctx, connect.NewRequest(&adminv1.SetApiClientRatesRequest{ClientId: id, MemberId: m, ReadRate: &zero}))
	if err != nil || res.Msg.GetClient().ReadRate != nil {
		t.Fatalf("clear: %v %v", res, err)
	}
	list, err := a.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: m, Limit: 1}))
	if err != nil || len(list.Msg.GetEvents()) != 1 || list.Msg.GetEvents()[0].GetAction() != "api_client.set_rates" ||
		list.Msg.GetEvents()[0].GetClientId() != id || list.Msg.GetEvents()[0].GetActorMemberId() != m {
		t.Fatalf("audit: %v %v", list, err)
	}
	// Bad rates are refused.
	bad := int32(-1)
	_, err = a.AdminClient.SetApiClientRates(ctx, connect.NewRequest(&adminv1.SetApiClientRatesRequest{ClientId: id, MemberId: m, WriteRate: &bad}))
	assertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
}

// limiterClock is the clock of a test's rate limit buckets. It moves only
// when the test moves it, so a bucket refills exactly as the test says,
// however slowly the machine runs the requests in between.
type limiterClock struct {
	mu  sync.Mutex
	now time.Time
}

func newLimiterClock() *limiterClock { return &limiterClock{now: time.Now()} }

// Now is the clock's time.
func (c *limiterClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *limiterClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// lockoutHarness runs a server with the product's failed-authentication
// budget (10 a minute, burst 10, per client id and source address; 300
// per source address) on a limiter clock the test moves. No proxy is
// trusted: the source is the peer address, which a test picks with
// [fromAddr].
func lockoutHarness(t *testing.T) (*servertest.Harness, *limiterClock) {
	clock := newLimiterClock()
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) {
		limits := ratelimit.DefaultConfig()
		limits.Now = clock.Now
		c.Limits = &limits
	}})
	return h, clock
}

// fromAddr is an HTTP client whose connections leave from the loopback
// address ip: the test listener accepts any of 127/8, and the server sees
// ip as the peer, and so as the source address.
func fromAddr(t *testing.T, ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// postForm posts a form to the public listener through c, with HTTP
// Basic when basic is not empty, and returns the status and body.
func postForm(t *testing.T, h *servertest.Harness, c *http.Client, path string, form url.Values, basic string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.Public.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic != "" {
		req.Header.Set("Authorization", basic)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// rpcToken asks for a token over Connect through c, with HTTP Basic.
func rpcToken(h *servertest.Harness, c *http.Client, id, sec string) (*connect.Response[tokenv1.CreateTokenResponse], error) {
	req := connect.NewRequest(&tokenv1.CreateTokenRequest{GrantType: "client_credentials"})
	req.Header().Set("Authorization", basicHeader(id, sec))
	return tokenv1connect.NewTokenServiceClient(c, h.Public.URL).CreateToken(context.Background(), req)
}

// rpcRevoke revokes a token over Connect through c, with HTTP Basic.
func rpcRevoke(h *servertest.Harness, c *http.Client, id, sec, tok string) error {
	req := connect.NewRequest(&tokenv1.RevokeTokenRequest{Token: tok})
	req.Header().Set("Authorization", basicHeader(id, sec))
	_, err := tokenv1connect.NewTokenServiceClient(c, h.Public.URL).RevokeToken(context.Background(), req)
	return err
}

// TestWrongSecretsFromOneSourceDoNotLockTheClientOutElsewhere: failed
// client authentications were counted per client id alone, so ten wrong
// secrets from anywhere refused the client's right secret everywhere,
// and a thief holding a stolen token could stop its owner from revoking
// it. They are now counted per client id and source address: the
// guessing address gets 429 for that client id whatever the secret, on
// REST and Connect, token and revocation alike, while the owner, from
// another address, gets tokens and revokes the stolen one.
func TestWrongSecretsFromOneSourceDoNotLockTheClientOutElsewhere(t *testing.T) {
	t.Parallel()
	h, _ := lockoutHarness(t)
	ws, m := h.Workspace("Stolen Token Co")
	id, sec := h.Client(ws, m, "contacts:read")
	stolen := h.Token(id, sec, "")
	thief, owner := fromAddr(t, "127.0.0.2"), fromAddr(t, "127.0.0.3")
	wrong := sec[:len(sec)-4] + "abcd"
	grant := url.Values{"grant_type": {"client_credentials"}}
	inBody := func(sec string) url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}
	}
	for i := range 12 {
		want := http.StatusUnauthorized
		if i >= 10 {
			want = http.StatusTooManyRequests
		}
		if s, b := postForm(t, h, thief, "/api/oauth/token", inBody(wrong), ""); s != want {
			t.Fatalf("wrong secret %d: %d %s, want %d", i, s, b, want)
		}
	}

	// The guessing address is refused for this client id, even with the
	// right secret: the limiter is no oracle.
	if s, b := postForm(t, h, thief, "/api/oauth/token", inBody(sec), ""); s != 429 || decode(t, b)["error"] != "rate_limited" {
		t.Fatalf("right secret in the body from the guessing address: %d %s", s, b)
	}
	if s, b := postForm(t, h, thief, "/api/oauth/token", grant, basicHeader(id, sec)); s != 429 {
		t.Fatalf("right secret by Basic from the guessing address: %d %s", s, b)
	}
	if s, b := postForm(t, h, thief, "/api/oauth/revoke", url.Values{"token": {stolen}}, basicHeader(id, sec)); s != 429 {
		t.Fatalf("revoke from the guessing address: %d %s", s, b)
	}
	_, err := rpcToken(h, thief, id, sec)
	assertConnectError(t, err, connect.CodeResourceExhausted, "rate_limited")
	assertConnectError(t, rpcRevoke(h, thief, id, sec, stolen), connect.CodeResourceExhausted, "rate_limited")

	// The owner's address gets tokens, by Basic and in the body, over REST
	// and Connect...
	if s, b := postForm(t, h, owner, "/api/oauth/token", inBody(sec), ""); s != 200 {
		t.Fatalf("right secret in the body from another address: %d %s", s, b)
	}
	if s, b := postForm(t, h, owner, "/api/oauth/token", grant, basicHeader(id, sec)); s != 200 {
		t.Fatalf("right secret by Basic from another address: %d %s", s, b)
	}
	res, err := rpcToken(h, owner, id, sec)
	if err != nil {
		t.Fatalf("CreateToken over Connect from another address: %v", err)
	}
	// ... and revokes the stolen token, over REST, and its new one over
	// Connect.
	if s, b := postForm(t, h, owner, "/api/oauth/revoke", url.Values{"token": {stolen}}, basicHeader(id, sec)); s != 200 {
		t.Fatalf("revoke from another address: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/me", stolen, "", ""); s != 401 {
		t.Fatalf("the stolen token after its revocation: %d %s", s, b)
	}
	if err := rpcRevoke(h, owner, id, sec, res.Msg.GetAccessToken()); err != nil {
		t.Fatalf("RevokeToken over Connect from another address: %v", err)
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/me", res.Msg.GetAccessToken(), "", ""); s != 401 {
		t.Fatalf("the token revoked over Connect: %d %s", s, b)
	}
}

// TestSlowWrongSecretsNeverLockTheClientOutElsewhere: one wrong secret
// every 5 s outpaces the refill of a failure bucket (one every 6 s), so it
// kept a client id locked out for good, everywhere. It now keeps only its
// own address locked out: the right secret from there is refused at every
// step, and from the owner's address served at every step.
func TestSlowWrongSecretsNeverLockTheClientOutElsewhere(t *testing.T) {
	t.Parallel()
	h, clock := lockoutHarness(t)
	ws, m := h.Workspace("Slow Guess Co")
	id, sec := h.Client(ws, m, "contacts:read")
	thief, owner := fromAddr(t, "127.0.0.4"), fromAddr(t, "127.0.0.5")
	form := func(sec string) url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}
	}
	for i := range 10 {
		if s, b := postForm(t, h, thief, "/api/oauth/token", form("wrong"), ""); s != 401 {
			t.Fatalf("wrong secret %d: %d %s", i, s, b)
		}
	}
	// 40 steps of 5 s: three times the time the bucket takes to fill.
	for step := range 40 {
		clock.Advance(5 * time.Second)
		if s, b := postForm(t, h, thief, "/api/oauth/token", form("wrong"), ""); s != 401 && s != 429 {
			t.Fatalf("step %d: wrong secret: %d %s", step, s, b)
		}
		if s, b := postForm(t, h, thief, "/api/oauth/token", form(sec), ""); s != 429 {
			t.Fatalf("step %d: right secret from the guessing address: %d %s", step, s, b)
		}
		if s, b := postForm(t, h, owner, "/api/oauth/token", form(sec), ""); s != 200 {
			t.Fatalf("step %d: right secret from another address: %d %s", step, s, b)
		}
	}
	if _, err := rpcToken(h, owner, id, sec); err != nil {
		t.Fatalf("CreateToken over Connect from another address: %v", err)
	}
}

// TestSourceFloodDoesNotLockOtherSourcesOut: 320 requests naming
// client_id=nobody from one address use up that address's budget (300 a
// minute): from there every client, even with its right secret, is
// refused. Another tenant's client, from another address, is served.
func TestSourceFloodDoesNotLockOtherSourcesOut(t *testing.T) {
	t.Parallel()
	h, _ := lockoutHarness(t)
	ws, m := h.Workspace("Other Tenant Co")
	id, sec := h.Client(ws, m, "contacts:read")
	flooder, other := fromAddr(t, "127.0.0.6"), fromAddr(t, "127.0.0.7")
	limited := counterValue(metrics.RateLimited.WithLabelValues("auth_source"))
	nobody := url.Values{"grant_type": {"client_credentials"}, "client_id": {"nobody"}, "client_secret": {"guess"}}
	for i := range 320 {
		want := http.StatusUnauthorized
		if i >= 300 {
			want = http.StatusTooManyRequests
		}
		if s, b := postForm(t, h, flooder, "/api/oauth/token", nobody, ""); s != want {
			t.Fatalf("request %d for nobody: %d %s, want %d", i, s, b, want)
		}
	}
	if got := counterValue(metrics.RateLimited.WithLabelValues("auth_source")) - limited; got < 20 {
		t.Errorf("partner_rate_limited_total{bucket=auth_source} grew by %v, want ≥ 20", got)
	}
	grant := url.Values{"grant_type": {"client_credentials"}}
	if s, b := postForm(t, h, flooder, "/api/oauth/token", grant, basicHeader(id, sec)); s != 429 {
		t.Fatalf("another tenant's right secret from the flooding address: %d %s", s, b)
	}
	_, err := rpcToken(h, flooder, id, sec)
	assertConnectError(t, err, connect.CodeResourceExhausted, "rate_limited")
	if s, b := postForm(t, h, other, "/api/oauth/token", grant, basicHeader(id, sec)); s != 200 {
		t.Fatalf("another tenant's right secret from another address: %d %s", s, b)
	}
	res, err := rpcToken(h, other, id, sec)
	if err != nil {
		t.Fatalf("CreateToken over Connect from another address: %v", err)
	}
	if err := rpcRevoke(h, other, id, sec, res.Msg.GetAccessToken()); err != nil {
		t.Fatalf("RevokeToken over Connect from another address: %v", err)
	}
}
