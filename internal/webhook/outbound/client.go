package outbound

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Defaults of Config.
const (
	DefaultTimeout          = 10 * time.Second // PARTNER_WEBHOOK_TIMEOUT
	DefaultMaxResponseBytes = 64 << 10
	DefaultUserAgent        = "partnerapi-webhooks/1"
)

// Machine-readable values of Result.Error, stored in the delivery log and
// shown to partners.
const (
	ErrorAddressNotAllowed = "address_not_allowed" // a refused network, at validation or dial
	ErrorInvalidURL        = "invalid_url"         // the stored URL no longer passes ValidateURL
	ErrorTimeout           = "timeout"             // no response within the timeout
	ErrorRedirect          = "redirect"            // a 3xx answer; redirects are not followed
	ErrorConnectionRefused = "connection_refused"
	ErrorConnectionClosed  = "connection_closed" // reset or closed before a response
	ErrorTLS               = "tls"               // handshake or certificate verification failed
	ErrorDNS               = "dns"               // the host name did not resolve
	ErrorCanceled          = "canceled"          // the caller's context was canceled (shutdown)
	ErrorConnection        = "connection_failed" // any other failure before a response
)

// Config sets up a Client. The zero value is the production setting.
type Config struct {
	// Timeout bounds one attempt: dial, TLS, request and response headers,
	// and reading the (capped) body. 0 means DefaultTimeout.
	Timeout time.Duration
	// AllowedNetworks may be dialled even when refused otherwise, and are
	// the only networks plain http may reach.
	AllowedNetworks Networks
	// MaxResponseBytes caps the response body read, and the response
	// headers; 0 means 64 KiB. The rest of a body is never read: the
	// connection is closed instead.
	MaxResponseBytes int64
	// RootCAs replaces the system roots; tests trust an httptest server's
	// certificate with it. Verification is never turned off.
	RootCAs *x509.CertPool
	// Resolver resolves host names at dial time; nil is net.DefaultResolver.
	// Tests point it at a DNS server of their own.
	Resolver *net.Resolver
	// UserAgent is sent unless the caller's headers set one.
	UserAgent string
	// MaxIdleConnsPerHost keeps connections to busy receivers open; 0 means 64.
	MaxIdleConnsPerHost int
}

// Client posts deliveries. It is safe for concurrent use, and keeps
// connections alive per receiver; each connection was checked when dialled.
type Client struct {
	cfg     Config
	https   *http.Transport
	http    *http.Transport
	client  *http.Client
	maxBody int64
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.MaxIdleConnsPerHost <= 0 {
		cfg.MaxIdleConnsPerHost = 64
	}
	c := &Client{cfg: cfg, maxBody: cfg.MaxResponseBytes}
	c.https = c.transport(false)
	c.http = c.transport(true)
	c.client = &http.Client{
		Transport: byScheme{c},
		// A redirect ends the attempt: following one would let a receiver
		// send us to an address ValidateURL never saw (and the dialer would
		// only catch it if it were refused).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// Timeout is the bound of one attempt.
func (c *Client) Timeout() time.Duration { return c.cfg.Timeout }

// transport builds the transport of one scheme; plainHTTP transports may
// dial only allowed networks.
func (c *Client) transport(plainHTTP bool) *http.Transport {
	d := &net.Dialer{
		Timeout:   c.cfg.Timeout,
		KeepAlive: 30 * time.Second,
		Resolver:  c.cfg.Resolver,
		// Control runs for every address the dialer tries, after DNS and
		// before connect: what is checked is what is connected to.
		Control: func(network, address string, _ syscall.RawConn) error {
			return checkDial(network, address, plainHTTP, c.cfg.AllowedNetworks)
		},
	}
	return &http.Transport{
		Proxy:                  nil, // never HTTPS_PROXY and friends
		DialContext:            d.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: c.cfg.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    c.cfg.Timeout,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    c.cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true, // the body is read only to be discarded
		MaxResponseHeaderBytes: c.cfg.MaxResponseBytes,
	}
}

// checkDial is the dialer's Control: the address must pass CheckAddr, and
// for plain http be inside the allowed networks.
func checkDial(network, address string, plainHTTP bool, allowed Networks) error {
	if network != "tcp4" && network != "tcp6" {
		return fmt.Errorf("check dial: network %s not allowed: %w", network, ErrAddressNotAllowed)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("check dial %s: %w", address, ErrAddressNotAllowed)
	}
	a := ap.Addr()
	if plainHTTP && !allowed.Contains(a) {
		return &AddressError{Addr: a, Reason: "plain http only to the allowed networks"}
	}
	return CheckAddr(a, allowed)
}

// byScheme sends each request through its scheme's transport, so that an
// http URL can never use the https transport's wider dial rule.
type byScheme struct{ c *Client }

func (b byScheme) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.URL.Scheme {
	case "https":
		return b.c.https.RoundTrip(r)
	case "http":
		return b.c.http.RoundTrip(r)
	}
	return nil, fmt.Errorf("round trip: scheme %q: %w", r.URL.Scheme, ErrInvalidURL)
}

// CloseIdleConnections closes kept-alive connections (e.g. after the
// allowed networks changed, or at shutdown).
func (c *Client) CloseIdleConnections() {
	c.https.CloseIdleConnections()
	c.http.CloseIdleConnections()
}

// Result is the outcome of one attempt, as the delivery log records it.
type Result struct {
	// ResponseStatus is the HTTP status, 0 when no response arrived.
	ResponseStatus int
	// Duration is from the start of the attempt to the end of reading.
	Duration time.Duration
	// Error is one of the Error… constants, "" when a response arrived
	// that was not a redirect (a 500 is Error "" and ResponseStatus 500).
	Error string
	// Err is the underlying error for logs; never shown to partners.
	Err error
	// RetryAfter is the wait a 429 or 503 asked for in Retry-After
	// (seconds or an HTTP date), 0 when none; at most MaxRetryAfter.
	RetryAfter time.Duration
	// ResponseBytes is how much of the response body was read.
	ResponseBytes int64
}

// Succeeded reports a 2xx answer.
func (r Result) Succeeded() bool {
	return r.Error == "" && r.ResponseStatus >= 200 && r.ResponseStatus <= 299
}

// Gone reports a 410 answer: the receiver asks us to stop.
func (r Result) Gone() bool { return r.ResponseStatus == http.StatusGone }

// Post makes one attempt: POST body to rawURL with header (Content-Type
// defaults to application/json). It validates rawURL again (the allowed
// networks may have changed since it was stored), bounds the attempt by the
// Client's timeout, and never follows a redirect.
func (c *Client) Post(ctx context.Context, rawURL string, header http.Header, body []byte) Result {
	start := time.Now()
	res := c.post(ctx, rawURL, header, body)
	res.Duration = time.Since(start)
	return res
}

func (c *Client) post(parent context.Context, rawURL string, header http.Header, body []byte) Result {
	if err := ValidateURL(rawURL, c.cfg.AllowedNetworks); err != nil {
		code := ErrorInvalidURL
		if errors.Is(err, ErrAddressNotAllowed) {
			code = ErrorAddressNotAllowed
		}
		return Result{Error: code, Err: err}
	}
	ctx, cancel := context.WithTimeout(parent, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return Result{Error: ErrorInvalidURL, Err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", c.cfg.UserAgent)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return Result{Error: classify(parent, err), Err: err}
	}
	// The status decides the attempt; the body is read (up to the cap) only
	// so that the connection can be kept, and a failure reading it is not a
	// failed delivery.
	n, _ := io.CopyN(io.Discard, resp.Body, c.maxBody)
	_ = resp.Body.Close()
	res := Result{ResponseStatus: resp.StatusCode, ResponseBytes: n}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		res.Error = ErrorRedirect
		res.Err = fmt.Errorf("post webhook: %s answered %d, redirects are not followed", req.URL.Redacted(), resp.StatusCode)
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return res
}

// classify maps a failed request to a Result.Error value.
func classify(parent context.Context, err error) string {
	var addrErr *AddressError
	var dnsErr *net.DNSError
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var recordErr tls.RecordHeaderError
	var alertErr tls.AlertError
	switch {
	case errors.As(err, &addrErr) || errors.Is(err, ErrAddressNotAllowed):
		return ErrorAddressNotAllowed
	case errors.Is(parent.Err(), context.Canceled):
		return ErrorCanceled
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return ErrorTimeout
	case errors.As(err, &dnsErr):
		return ErrorDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrorConnectionRefused
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) ||
		errors.As(err, &invalidCert) || errors.As(err, &recordErr) || errors.As(err, &alertErr):
		return ErrorTLS
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return ErrorConnectionClosed
	}
	return ErrorConnection
}
