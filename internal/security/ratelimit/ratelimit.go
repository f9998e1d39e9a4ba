// Package ratelimit keeps the token buckets of the service's rate limits
// in this replica's memory (N replicas allow N times the rates):
//
//   - per API client, a read bucket and a write bucket (default 100 and 50
//     requests per second, burst twice the rate; a client's own rates win);
//   - per client id and source address, and per source address, a bucket
//     of failed client authentications (default 10 per minute per client
//     id and source, burst 10; 30 times that per source). While one is
//     empty, every token and revocation request naming that client id from
//     that address, or coming from that address, is refused, even with the
//     right secret: a limiter that still answered correct guesses would be
//     an oracle. No bucket belongs to a client id alone: failures from one
//     address never refuse the right secret from another, or a thief
//     holding a stolen token could stop its owner from revoking it.
//
// A [Decision] says whether a request may go on and carries what the
// draft-ietf-httpapi-ratelimit-headers-11 headers and Retry-After need.
// The buckets are golang.org/x/time/rate limiters: a well-tested token
// bucket whose TokensAt, Limit and Burst give exactly the remaining
// requests, the quota and the refill time the headers report.
package ratelimit

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/observe/metrics"
)

// Bucket names a kind of bucket; it is the policy name in the RateLimit
// headers and the label of partner_rate_limited_total.
type Bucket string

// Buckets.
const (
	Read  Bucket = "read"
	Write Bucket = "write"
	// AuthClient is the failure bucket of a client id at one source
	// address (its name predates the source in its key).
	AuthClient Bucket = "auth_client"
	// AuthSource is the failure bucket of a source address.
	AuthSource Bucket = "auth_source"
)

// SourceFactor is how many more failed authentications a source address
// may make than one client id from it: many partners behind one NAT
// share it.
const SourceFactor = 30

// Config holds the server defaults.
type Config struct {
	// Read and Write are requests per second per client; 0 turns the
	// server default off (a client's own rate still applies). The burst is
	// twice the rate.
	Read, Write int
	// AuthFailures is how many failed client authentications one client
	// id may make from one source address per AuthWindow (burst the
	// same); a source address may make SourceFactor times as many, for
	// all client ids together. 0 turns both failure buckets off.
	AuthFailures int
	// AuthWindow is the period of AuthFailures; default one minute.
	AuthWindow time.Duration
	// MaxKeys bounds the number of buckets of each kind held in memory;
	// default 100,000.
	MaxKeys int
	// Now is the clock of every bucket; default time.Now. Tests move it
	// instead of sleeping.
	Now func() time.Time
}

// DefaultConfig is the product's defaults.
func DefaultConfig() Config {
	return Config{Read: 100, Write: 50, AuthFailures: 10, AuthWindow: time.Minute}
}

// Limiter holds the buckets.
type Limiter struct {
	cfg Config

	mu       sync.RWMutex
	clients  map[clientKey]*rate.Limiter
	failures map[failureKey]*rate.Limiter
	// checking counts, per failure bucket, the requests admitted by
	// [Limiter.Attempt] whose secret is still being checked: each may
	// still fail, so each holds a place in the bucket until it knows.
	// Entries live only while such requests run.
	checking map[failureKey]int
	// released is closed, and replaced, whenever an attempt ends, to wake
	// the attempts waiting for a place.
	released chan struct{}
}

type clientKey struct {
	id     uuid.UUID
	bucket Bucket
}

// failureKey names a failure bucket: a source address's (AuthSource, no
// client), or a client id's at a source address (AuthClient).
type failureKey struct {
	bucket         Bucket
	client, source string
}

// New returns a limiter with the given defaults.
func New(cfg Config) *Limiter {
	if cfg.AuthWindow <= 0 {
		cfg.AuthWindow = time.Minute
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 100_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{cfg: cfg, clients: map[clientKey]*rate.Limiter{}, failures: map[failureKey]*rate.Limiter{},
		checking: map[failureKey]int{}, released: make(chan struct{})}
}

// maxAttemptWait bounds how long an attempt waits for a place held by
// attempts still being checked.
const maxAttemptWait = 2 * time.Second

// Decision is the outcome of one check, with the state of the bucket that
// decided it.
type Decision struct {
	// Bucket is the bucket checked; empty when no limit applies.
	Bucket Bucket
	// Allowed is false when the request must be refused with 429.
	Allowed bool
	// Quota is the burst: the most requests the bucket holds (q).
	Quota int
	// Window is the seconds an empty bucket takes to fill (w).
	Window int
	// Remaining is the requests left now (r).
	Remaining int
	// Reset is the seconds until the bucket is full again (t).
	Reset int
	// RetryAfter is the whole seconds, at least 1, until a refused
	// request may succeed.
	RetryAfter int
}

// Header names.
const (
	PolicyHeader     = "RateLimit-Policy"
	RateLimitHeader  = "RateLimit"
	RetryAfterHeader = "Retry-After"
)

// SetHeaders writes the RateLimit-Policy and RateLimit headers of a read
// or write decision (and Retry-After when it refuses). A decision without
// a bucket writes nothing. It runs on every API request, so it builds both
// values in one buffer.
func (d Decision) SetHeaders(h http.Header) {
	if d.Bucket != Read && d.Bucket != Write {
		if !d.Allowed && d.Bucket != "" {
			h.Set(RetryAfterHeader, strconv.Itoa(d.RetryAfter))
		}
		return
	}
	b := make([]byte, 0, 64)
	b = append(append(append(b, '"'), d.Bucket...), `";q=`...)
	b = append(strconv.AppendInt(b, int64(d.Quota), 10), ";w="...)
	b = strconv.AppendInt(b, int64(d.Window), 10)
	policy := len(b)
	b = append(append(append(b, '"'), d.Bucket...), `";r=`...)
	b = append(strconv.AppendInt(b, int64(d.Remaining), 10), ";t="...)
	b = strconv.AppendInt(b, int64(d.Reset), 10)
	all := string(b)
	values := []string{all[:policy], all[policy:]}
	h[canonicalPolicy], h[canonicalRateLimit] = values[:1:1], values[1:]
	if !d.Allowed {
		h.Set(RetryAfterHeader, strconv.Itoa(d.RetryAfter))
	}
}

// The header names as http.Header keys them.
var (
	canonicalPolicy    = http.CanonicalHeaderKey(PolicyHeader)
	canonicalRateLimit = http.CanonicalHeaderKey(RateLimitHeader)
)

// Err is the 429 of a refused decision.
func (d Decision) Err() *apierror.Error {
	msg := "too many requests; retry after " + strconv.Itoa(d.RetryAfter) + " s"
	switch d.Bucket {
	case Read:
		msg = "the client's read rate limit is exhausted; retry after " + strconv.Itoa(d.RetryAfter) + " s"
	case Write:
		msg = "the client's write rate limit is exhausted; retry after " + strconv.Itoa(d.RetryAfter) + " s"
	case AuthClient, AuthSource:
		msg = "too many failed client authentications; retry after " + strconv.Itoa(d.RetryAfter) + " s"
	}
	e := &apierror.Error{Code: apierror.CodeRateLimited, Message: msg, RetryAfter: strconv.Itoa(d.RetryAfter)}
	if d.Bucket == Read || d.Bucket == Write {
		e.Header = http.Header{}
		d.SetHeaders(e.Header)
	}
	return e
}

// Peek reports the state of a client's bucket without spending from it.
func (l *Limiter) Peek(client uuid.UUID, b Bucket, own int32) Decision {
	limit, burst := l.rate(b, own)
	if limit == 0 {
		return Decision{Allowed: true}
	}
	now := l.cfg.Now()
	l.mu.RLock()
	lim := l.clients[clientKey{client, b}]
	l.mu.RUnlock()
	if lim == nil || lim.Limit() != limit || lim.Burst() != burst {
		lim = rate.NewLimiter(limit, burst)
	}
	return decide(b, lim, now, true)
}

// rate is the rate and burst of a client's bucket; 0 when it is off.
func (l *Limiter) rate(b Bucket, own int32) (rate.Limit, int) {
	perSecond := int(own)
	if perSecond <= 0 {
		perSecond = l.cfg.Read
		if b == Write {
			perSecond = l.cfg.Write
		}
	}
	if perSecond <= 0 {
		return 0, 0
	}
	return rate.Limit(perSecond), 2 * perSecond
}

// Take spends one request from a client's read or write bucket. own is the
// client's own rate (0: the server default). A bucket whose rate is 0 is
// off: the decision allows and has no Bucket.
func (l *Limiter) Take(client uuid.UUID, b Bucket, own int32) Decision {
	limit, burst := l.rate(b, own)
	if limit == 0 {
		return Decision{Allowed: true}
	}
	now := l.cfg.Now()
	k := clientKey{client, b}
	l.mu.RLock()
	lim := l.clients[k]
	l.mu.RUnlock()
	if lim == nil {
		l.mu.Lock()
		if lim = l.clients[k]; lim == nil {
			makeRoom(l.clients, l.cfg.MaxKeys, now)
			lim = rate.NewLimiter(limit, burst)
			l.clients[k] = lim
		}
		l.mu.Unlock()
	}
	if lim.Limit() != limit || lim.Burst() != burst {
		// The client's rates changed: keep what is left, at the new rate.
		lim.SetLimitAt(now, limit)
		lim.SetBurstAt(now, burst)
	}
	allowed := lim.AllowN(now, 1)
	d := decide(b, lim, now, allowed)
	if !allowed {
		metrics.RateLimited.WithLabelValues(string(b)).Inc()
	}
	return d
}

// AuthAllowed reports whether a token or revocation request naming
// clientID (empty when none could be read) from source may be processed:
// it is refused while the failure bucket of clientID at source, or of
// source, is empty. It spends nothing, and does not count the requests
// whose secret is still being checked.
func (l *Limiter) AuthAllowed(clientID, source string) Decision {
	if l.cfg.AuthFailures <= 0 {
		return Decision{Allowed: true}
	}
	now := l.cfg.Now()
	l.mu.RLock()
	defer l.mu.RUnlock()
	d := l.authDecision(l.failureKeys(clientID, source), now, false)
	if !d.Allowed {
		metrics.RateLimited.WithLabelValues(string(d.Bucket)).Inc()
	}
	return d
}

// Attempt admits a request that is about to check a client's secret, as
// AuthAllowed would, and holds a place for it in both failure buckets
// until the outcome is known: a check and a later spend would let every
// request that arrives while others are being checked through, so that
// concurrent guesses could exceed the budget many times over. When the
// places left are all held by attempts still being checked, it waits
// (at most ctx's life or two seconds) for one of them to end instead of
// refusing: a burst of concurrent requests with the right secret is
// delayed, never refused, while guesses still cannot outrun the budget.
// The caller must end an admitted attempt with [Attempt.Failed] or
// [Attempt.Release]. A refused attempt (or any attempt while the buckets
// are off) needs no ending; its methods do nothing.
func (l *Limiter) Attempt(ctx context.Context, clientID, source string) (*Attempt, Decision) {
	if l.cfg.AuthFailures <= 0 {
		return nil, Decision{Allowed: true}
	}
	keys := l.failureKeys(clientID, source)
	timeout := time.NewTimer(maxAttemptWait)
	defer timeout.Stop()
	for {
		now := l.cfg.Now()
		l.mu.Lock()
		d := l.authDecision(keys, now, false)
		if !d.Allowed {
			// The bucket itself is empty: failures, not attempts, used it.
			l.mu.Unlock()
			metrics.RateLimited.WithLabelValues(string(d.Bucket)).Inc()
			return nil, d
		}
		if d = l.authDecision(keys, now, true); d.Allowed {
			for _, k := range keys {
				l.checking[k]++
			}
			l.mu.Unlock()
			return &Attempt{l: l, keys: keys}, d
		}
		released := l.released
		l.mu.Unlock()
		select {
		case <-released:
		case <-ctx.Done():
			metrics.RateLimited.WithLabelValues(string(d.Bucket)).Inc()
			return nil, d
		case <-timeout.C:
			metrics.RateLimited.WithLabelValues(string(d.Bucket)).Inc()
			return nil, d
		}
	}
}

// Attempt is a request admitted by [Limiter.Attempt] whose secret is being
// checked.
type Attempt struct {
	l     *Limiter
	keys  []failureKey
	ended bool
}

// Failed ends the attempt as a failed authentication: it is spent from
// the buckets.
func (a *Attempt) Failed() {
	if a == nil || a.ended {
		return
	}
	a.ended = true
	now := a.l.cfg.Now()
	a.l.mu.Lock()
	defer a.l.mu.Unlock()
	for _, k := range a.keys {
		a.l.doneChecking(k)
		a.l.failureLocked(k, now)
	}
}

// Release ends the attempt without a failure (the secret was right, or the
// check could not be made): its place is given back. It does nothing
// after Failed, so it can be deferred.
func (a *Attempt) Release() {
	if a == nil || a.ended {
		return
	}
	a.ended = true
	a.l.mu.Lock()
	defer a.l.mu.Unlock()
	for _, k := range a.keys {
		a.l.doneChecking(k)
	}
}

// doneChecking gives back an attempt's place; l.mu is held.
func (l *Limiter) doneChecking(k failureKey) {
	close(l.released)
	l.released = make(chan struct{})
	if l.checking[k] <= 1 {
		delete(l.checking, k)
		return
	}
	l.checking[k]--
}

// failureKeys are the failure buckets of a request: its source's, and,
// when it names a client id, that client id's at its source. A client id
// has no bucket of its own across sources: failures from one address
// must never refuse the right secret from another. (An unreadable source,
// "", counts as one source for the client ids it names.)
func (l *Limiter) failureKeys(clientID, source string) []failureKey {
	keys := make([]failureKey, 0, 2)
	if source != "" {
		keys = append(keys, failureKey{bucket: AuthSource, source: source})
	}
	if clientID != "" {
		keys = append(keys, failureKey{bucket: AuthClient, client: clientID, source: source})
	}
	return keys
}

// perWindow is the failure budget of a kind of failure bucket.
func (l *Limiter) perWindow(b Bucket) int {
	if b == AuthSource {
		return SourceFactor * l.cfg.AuthFailures
	}
	return l.cfg.AuthFailures
}

// authDecision refuses when a failure bucket of keys has no failure left
// (with inFlight, once the places held by attempts still being checked
// are counted as spent); when both are empty, it reports the one that
// takes longer to admit a request again, so that a client retrying after
// Retry-After is not refused by the other. Callers hold l.mu.
func (l *Limiter) authDecision(keys []failureKey, now time.Time, inFlight bool) Decision {
	refused := Decision{Allowed: true}
	for _, k := range keys {
		perWindow := l.perWindow(k.bucket)
		limit, burst := rate.Limit(float64(perWindow)/l.cfg.AuthWindow.Seconds()), perWindow
		tokens := float64(burst)
		if lim := l.failures[k]; lim != nil {
			tokens = lim.TokensAt(now)
		}
		if inFlight {
			tokens -= float64(l.checking[k])
		}
		if tokens >= 1 {
			continue
		}
		if d := decideAt(k.bucket, limit, burst, tokens, false); refused.Allowed || d.RetryAfter > refused.RetryAfter {
			refused = d
		}
	}
	return refused
}

// AuthFailed spends one failed authentication from the buckets of
// clientID at source (when clientID is not empty) and of source.
func (l *Limiter) AuthFailed(clientID, source string) {
	if l.cfg.AuthFailures <= 0 {
		return
	}
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.failureKeys(clientID, source) {
		l.failureLocked(k, now)
	}
}

// failureLocked spends one failure from the bucket k, making it when
// needed. Callers hold l.mu.
func (l *Limiter) failureLocked(k failureKey, now time.Time) {
	lim := l.failures[k]
	if lim == nil {
		makeRoom(l.failures, l.cfg.MaxKeys, now)
		perWindow := l.perWindow(k.bucket)
		lim = rate.NewLimiter(rate.Limit(float64(perWindow)/l.cfg.AuthWindow.Seconds()), perWindow)
		l.failures[k] = lim
	}
	lim.AllowN(now, 1)
}

// makeRoom keeps a map under maxKeys: first by dropping full buckets (a
// full bucket is the same as none), then, under a flood of new keys, by
// dropping the fullest: an emptied bucket (a client id locked out at a
// source after failed guesses, a client at its rate) is dropped last, so
// a flood of new keys cannot reset a lockout. Callers hold l.mu.
func makeRoom[K comparable](m map[K]*rate.Limiter, maxKeys int, now time.Time) {
	if len(m) < maxKeys {
		return
	}
	for k, lim := range m {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(m, k)
		}
	}
	target := maxKeys - maxKeys/10
	if len(m) < target {
		return
	}
	type held struct {
		key  K
		full float64 // share of the burst left
	}
	all := make([]held, 0, len(m))
	for k, lim := range m {
		all = append(all, held{k, lim.TokensAt(now) / float64(max(1, lim.Burst()))})
	}
	slices.SortFunc(all, func(a, b held) int { return cmp.Compare(b.full, a.full) })
	for _, h := range all[:len(all)-target+1] {
		delete(m, h.key)
	}
}

// decide reads a bucket's state after a check.
func decide(b Bucket, lim *rate.Limiter, now time.Time, allowed bool) Decision {
	return decideAt(b, lim.Limit(), lim.Burst(), lim.TokensAt(now), allowed)
}

// decideAt is decide for a bucket of the given rate and burst holding
// tokens (less than zero when more is committed than it holds).
func decideAt(b Bucket, limit rate.Limit, burst int, tokens float64, allowed bool) Decision {
	perSecond := float64(limit)
	left := math.Max(0, tokens)
	d := Decision{
		Bucket:    b,
		Allowed:   allowed,
		Quota:     burst,
		Window:    ceilSeconds(float64(burst) / perSecond),
		Remaining: int(math.Floor(left)),
		Reset:     ceilSeconds((float64(burst) - left) / perSecond),
	}
	if !allowed {
		d.RetryAfter = max(1, ceilSeconds((1-tokens)/perSecond))
	}
	return d
}

func ceilSeconds(s float64) int {
	if s <= 0 {
		return 0
	}
	// A hair of float noise must not add a whole second.
	return int(math.Ceil(s - 1e-9))
}
