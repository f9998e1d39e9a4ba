package outbound

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var loopbackOnly = Networks{mustPrefix("127.0.0.0/8")}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// receiver is an httptest server that counts the requests that reach it.
type receiver struct {
	*httptest.Server
	hits atomic.Int64
}

func newReceiver(t *testing.T, tls bool, h http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		h(w, req)
	})
	if tls {
		r.Server = httptest.NewTLSServer(handler)
	} else {
		r.Server = httptest.NewServer(handler)
	}
	t.Cleanup(r.Close)
	return r
}

// pool trusts the receiver's certificate (valid for 127.0.0.1, ::1 and
// example.com).
func (r *receiver) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(r.Certificate())
	return p
}

func (r *receiver) port() string {
	u, _ := url.Parse(r.URL)
	return u.Port()
}

func ok204(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

func TestPostDeliversOverVerifiedTLS(t *testing.T) {
	body := `{"id":"evt_1","type":"lead.created"}`
	var got atomic.Value
	r := newReceiver(t, true, func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got.Store(req.Method + " " + req.URL.Path + " " + req.Header.Get("Content-Type") + " " +
			req.Header.Get("Webhook-Id") + " " + req.Header.Get("User-Agent") + " " + string(b))
		w.WriteHeader(http.StatusNoContent)
	})
	c := New(Config{AllowedNetworks: loopbackOnly, RootCAs: r.pool()})
	h := http.Header{}
	h.Set("webhook-id", "evt_1")
	res := c.Post(t.Context(), r.URL+"/hooks", h, []byte(body))
	if !res.Succeeded() || res.ResponseStatus != 204 || res.Error != "" || res.Err != nil {
		t.Fatalf("Post = %+v, want a 204 success", res)
	}
	want := "POST /hooks application/json evt_1 " + DefaultUserAgent + " " + body
	if g, _ := got.Load().(string); g != want {
		t.Fatalf("receiver saw %q, want %q", g, want)
	}
	if res.Duration <= 0 {
		t.Fatalf("Duration = %v, want > 0", res.Duration)
	}
}

func TestPostRefusesUntrustedCertificate(t *testing.T) {
	r := newReceiver(t, true, ok204)
	c := New(Config{AllowedNetworks: loopbackOnly}) // system roots only
	res := c.Post(t.Context(), r.URL, nil, []byte("{}"))
	if res.Error != ErrorTLS || res.Succeeded() {
		t.Fatalf("Post to a self-signed receiver = %+v, want error %q", res, ErrorTLS)
	}
	if n := r.hits.Load(); n != 0 {
		t.Fatalf("receiver got %d requests, want 0", n)
	}
}

func TestPostRefusesLoopbackLiteral(t *testing.T) {
	r := newReceiver(t, true, ok204)
	c := New(Config{RootCAs: r.pool()}) // no allowed networks
	res := c.Post(t.Context(), r.URL, nil, []byte("{}"))
	if res.Error != ErrorAddressNotAllowed {
		t.Fatalf("Post(%s) = %+v, want error %q", r.URL, res, ErrorAddressNotAllowed)
	}
	if n := r.hits.Load(); n != 0 {
		t.Fatalf("receiver got %d requests, want 0", n)
	}
}

// A host name passes ValidateURL (names are not resolved at create); when
// its DNS answer is a refused address, the dialer refuses it on every
// attempt, before any connection is made.
func TestPostRefusesNameResolvingToRefusedAddress(t *testing.T) {
	r := newReceiver(t, true, ok204)
	dns := newTestDNS(t)
	u := "https://example.com:" + r.port() + "/hook"
	if err := ValidateURL(u, nil); err != nil {
		t.Fatalf("ValidateURL(%s) = %v, want nil", u, err)
	}
	c := New(Config{Resolver: dns.resolver(), RootCAs: r.pool()})
	for _, answer := range [][]string{
		{"127.0.0.1"},
		{"::1"},
		{"127.0.0.1", "::1"},
		{"::ffff:127.0.0.1"},
		{"10.0.0.1"},
		{"169.254.169.254"},
		{"fd00::1"},
		{"0.0.0.0"},
	} {
		dns.set("example.com", answer...)
		before := dns.lookups("example.com")
		res := c.Post(t.Context(), u, nil, []byte("{}"))
		if res.Error != ErrorAddressNotAllowed || res.Succeeded() {
			t.Errorf("Post with example.com = %v: %+v, want error %q", answer, res, ErrorAddressNotAllowed)
		}
		if dns.lookups("example.com") == before {
			t.Errorf("example.com = %v: no DNS lookup at dial time", answer)
		}
	}
	if n := r.hits.Load(); n != 0 {
		t.Fatalf("receiver got %d requests, want 0", n)
	}
}

// DNS rebinding: the same name first resolves to an address the operator
// allowed, then to one that is refused. The next connection is checked
// again and refused; the first one reached the receiver.
func TestPostRebindingIsCheckedOnEveryDial(t *testing.T) {
	r := newReceiver(t, true, ok204)
	dns := newTestDNS(t)
	u := "https://example.com:" + r.port() + "/hook"
	c := New(Config{Resolver: dns.resolver(), RootCAs: r.pool(), AllowedNetworks: Networks{mustPrefix("127.0.0.1/32")}})

	dns.set("example.com", "127.0.0.1")
	if res := c.Post(t.Context(), u, nil, []byte("{}")); !res.Succeeded() {
		t.Fatalf("Post with example.com = 127.0.0.1 (allowed) = %+v, want success", res)
	}
	c.CloseIdleConnections() // a kept-alive connection stays with the address checked when it was dialled
	dns.set("example.com", "127.0.0.2")
	res := c.Post(t.Context(), u, nil, []byte("{}"))
	if res.Error != ErrorAddressNotAllowed {
		t.Fatalf("Post with example.com = 127.0.0.2 (loopback, not allowed) = %+v, want error %q", res, ErrorAddressNotAllowed)
	}
	if n := r.hits.Load(); n != 1 {
		t.Fatalf("receiver got %d requests, want 1", n)
	}
}

func TestPostPlainHTTPOnlyToAllowedNetworks(t *testing.T) {
	r := newReceiver(t, false, ok204)
	res := New(Config{}).Post(t.Context(), r.URL, nil, []byte("{}"))
	if res.Error != ErrorInvalidURL {
		t.Fatalf("Post(%s) without allowed networks = %+v, want %q", r.URL, res, ErrorInvalidURL)
	}
	res = New(Config{AllowedNetworks: loopbackOnly}).Post(t.Context(), r.URL, nil, []byte("{}"))
	if !res.Succeeded() {
		t.Fatalf("Post(%s) with 127.0.0.0/8 allowed = %+v, want success", r.URL, res)
	}
	if n := r.hits.Load(); n != 1 {
		t.Fatalf("receiver got %d requests, want 1", n)
	}
}

func TestPostDoesNotFollowRedirects(t *testing.T) {
	var followed atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "/elsewhere", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, _ *http.Request) {
		followed.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	r := newReceiver(t, true, mux.ServeHTTP)
	res := New(Config{AllowedNetworks: loopbackOnly, RootCAs: r.pool()}).Post(t.Context(), r.URL+"/hook", nil, []byte("{}"))
	if res.Error != ErrorRedirect || res.ResponseStatus != http.StatusTemporaryRedirect || res.Succeeded() {
		t.Fatalf("Post to a redirect = %+v, want status 307, error %q", res, ErrorRedirect)
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests, want 0", n)
	}
}

// The receiver streams an endless body; the client reads 64 KiB, closes
// the connection and returns long before its timeout.
func TestPostReadsAtMost64KiB(t *testing.T) {
	stopped := make(chan error, 1)
	r := newReceiver(t, true, func(w http.ResponseWriter, req *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 16<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				stopped <- err
				return
			}
		}
	})
	timeout := 20 * time.Second
	res := New(Config{AllowedNetworks: loopbackOnly, RootCAs: r.pool(), Timeout: timeout}).Post(t.Context(), r.URL, nil, []byte("{}"))
	if !res.Succeeded() || res.ResponseBytes != 64<<10 {
		t.Fatalf("Post = %+v, want a success after reading 65536 bytes", res)
	}
	if res.Duration >= timeout/2 {
		t.Fatalf("Post took %v: it read until the timeout", res.Duration)
	}
	select {
	case <-stopped: // the receiver's write failed: we closed the connection
	case <-time.After(timeout):
		t.Fatal("the receiver kept writing: the connection was not closed")
	}
}

func TestPostTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	r := newReceiver(t, true, func(w http.ResponseWriter, req *http.Request) {
		select { // hang until the client gives up
		case <-req.Context().Done():
		case <-release:
		}
	})
	timeout := 300 * time.Millisecond
	res := New(Config{AllowedNetworks: loopbackOnly, RootCAs: r.pool(), Timeout: timeout}).Post(t.Context(), r.URL, nil, []byte("{}"))
	if res.Error != ErrorTimeout || res.ResponseStatus != 0 {
		t.Fatalf("Post to a hanging receiver = %+v, want error %q", res, ErrorTimeout)
	}
	if res.Duration < timeout || res.Duration > 10*timeout {
		t.Fatalf("Post returned after %v, want about %v", res.Duration, timeout)
	}
}

func TestPostCanceled(t *testing.T) {
	r := newReceiver(t, true, ok204)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := New(Config{AllowedNetworks: loopbackOnly, RootCAs: r.pool()}).Post(ctx, r.URL, nil, []byte("{}"))
	if res.Error != ErrorCanceled {
		t.Fatalf("Post with a canceled context = %+v, want %q", res, ErrorCanceled)
	}
}

func TestPostConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	res := New(Config{AllowedNetworks: loopbackOnly}).Post(t.Context(), "https://"+addr+"/hook", nil, []byte("{}"))
	if res.Error != ErrorConnectionRefused {
		t.Fatalf("Post to a closed port = %+v, want %q", res, ErrorConnectionRefused)
	}
}

func TestPostUnknownHost(t *testing.T) {
	dns := newTestDNS(t)
	res := New(Config{Resolver: dns.resolver()}).Post(t.Context(), "https://nowhere.example/hook", nil, []byte("{}"))
	if res.Error != ErrorDNS {
		t.Fatalf("Post to an unknown name = %+v, want %q", res, ErrorDNS)
	}
}

// HTTPS_PROXY would send the request to a proxy, which then dials what we
// refused or never checked; the client ignores it.
func TestPostIgnoresProxyEnvironment(t *testing.T) {
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		proxied.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer proxy.Close()
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	r := newReceiver(t, true, ok204)
	dns := newTestDNS(t)
	dns.set("example.com", "127.0.0.1")
	c := New(Config{AllowedNetworks: loopbackOnly, RootCAs: r.pool(), Resolver: dns.resolver()})
	// net/http reads the proxy environment once per process, so a transport
	// built with ProxyFromEnvironment by an earlier test may not see it: look
	// at the transports too.
	if c.https.Proxy != nil || c.http.Proxy != nil {
		t.Fatal("a transport has a Proxy function")
	}
	res := c.Post(t.Context(), "https://example.com:"+r.port()+"/hook", nil, []byte("{}"))
	if !res.Succeeded() || proxied.Load() != 0 || r.hits.Load() != 1 {
		t.Fatalf("Post = %+v, proxy hits %d, receiver hits %d; want a direct success", res, proxied.Load(), r.hits.Load())
	}
}

func TestPostStatusesAndRetryAfter(t *testing.T) {
	date := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		status     int
		retryAfter string
		succeeded  bool
		gone       bool
		wantAfter  time.Duration // 0: none; 1: about an hour
	}{
		{200, "", true, false, 0},
		{201, "", true, false, 0},
		{299, "", true, false, 0},
		{400, "", false, false, 0},
		{410, "", false, true, 0},
		{429, "120", false, false, 120 * time.Second},
		{503, date, false, false, 1},
		{503, "soon", false, false, 0},
		{500, "120", false, false, 0}, // Retry-After counts only on 429 and 503
	}
	for _, tt := range tests {
		r := newReceiver(t, true, func(w http.ResponseWriter, _ *http.Request) {
			if tt.retryAfter != "" {
				w.Header().Set("Retry-After", tt.retryAfter)
			}
			w.WriteHeader(tt.status)
		})
		res := New(Config{AllowedNetworks: loopbackOnly, RootCAs: r.pool()}).Post(t.Context(), r.URL, nil, []byte("{}"))
		if res.ResponseStatus != tt.status || res.Error != "" || res.Succeeded() != tt.succeeded || res.Gone() != tt.gone {
			t.Errorf("%d: Post = %+v, want status %d, succeeded %v, gone %v", tt.status, res, tt.status, tt.succeeded, tt.gone)
		}
		switch {
		case tt.wantAfter == 1:
			if res.RetryAfter < 59*time.Minute || res.RetryAfter > time.Hour {
				t.Errorf("%d Retry-After %s: RetryAfter = %v, want about 1h", tt.status, tt.retryAfter, res.RetryAfter)
			}
		case res.RetryAfter != tt.wantAfter:
			t.Errorf("%d Retry-After %q: RetryAfter = %v, want %v", tt.status, tt.retryAfter, res.RetryAfter, tt.wantAfter)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                                 0,
		"0":                                0,
		"5":                                5 * time.Second,
		" 120 ":                            120 * time.Second,
		"-5":                               0,
		"1.5":                              0,
		"later":                            0,
		"99999999999999999999999":          MaxRetryAfter,
		"86400000":                         MaxRetryAfter,
		"Thu, 26 Nov 2026 03:10:00 GMT":    10 * time.Minute,
		"Thursday, 26-Nov-26 03:00:30 GMT": 30 * time.Second, // RFC 850
		"Thu Nov 26 03:01:00 2026":         time.Minute,      // asctime
		"Thu, 26 Nov 2026 02:00:00 GMT":    0,                // past
		"Thu, 26 Nov 2027 03:00:00 GMT":    MaxRetryAfter,
	} {
		if got := ParseRetryAfter(v, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestPostKeepsCallerHeaders(t *testing.T) {
	var got atomic.Value
	r := newReceiver(t, true, func(w http.ResponseWriter, req *http.Request) {
		got.Store(req.Header.Get("Content-Type") + "|" + req.Header.Get("User-Agent") + "|" + strings.Join(req.Header.Values("X-Multi"), ","))
		w.WriteHeader(http.StatusOK)
	})
	h := http.Header{}
	h.Set("Content-Type", "application/cloudevents+json")
	h.Set("User-Agent", "custom/2")
	h.Add("X-Multi", "a")
	h.Add("X-Multi", "b")
	res := New(Config{AllowedNetworks: loopbackOnly, RootCAs: r.pool()}).Post(t.Context(), r.URL, h, nil)
	if !res.Succeeded() {
		t.Fatalf("Post = %+v", res)
	}
	if g, want := got.Load(), "application/cloudevents+json|custom/2|a,b"; g != want {
		t.Fatalf("receiver saw %q, want %q", g, want)
	}
}

func TestPostConnectionClosed(t *testing.T) {
	r := newReceiver(t, true, func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close() // no response at all
		}
	})
	res := New(Config{AllowedNetworks: loopbackOnly, RootCAs: r.pool()}).Post(t.Context(), r.URL, nil, []byte("{}"))
	if res.Error != ErrorConnectionClosed || res.ResponseStatus != 0 {
		t.Fatalf("Post to a receiver that hangs up = %+v, want %q", res, ErrorConnectionClosed)
	}
}
