package ratelimit

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestTakeReportsTheBucket(t *testing.T) {
	t.Parallel()
	l := New(Config{Read: 10, Write: 5})
	c := uuid.New()
	d := l.Take(c, Read, 0)
	if d != (Decision{Bucket: Read, Allowed: true, Quota: 20, Window: 2, Remaining: 19, Reset: 1}) {
		t.Fatalf("first read: %+v", d)
	}
	h := http.Header{}
	d.SetHeaders(h)
	if h.Get("RateLimit-Policy") != `"read";q=20;w=2` || h.Get("RateLimit") != `"read";r=19;t=1` || h.Get("Retry-After") != "" {
		t.Fatalf("headers %v", h)
	}
	for range 19 {
		if d = l.Take(c, Read, 0); !d.Allowed {
			t.Fatalf("refused within the burst: %+v", d)
		}
	}
	d = l.Take(c, Read, 0)
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 1 || d.Reset != 2 {
		t.Fatalf("past the burst: %+v", d)
	}
	h = http.Header{}
	d.SetHeaders(h)
	if h.Get("Retry-After") != "1" || h.Get("RateLimit") != `"read";r=0;t=2` {
		t.Fatalf("refusal headers %v", h)
	}
	if e := d.Err(); e.Code != "rate_limited" || e.RetryAfter != "1" || e.Header.Get("RateLimit") == "" {
		t.Fatalf("refusal error %+v", e)
	}
	// The write bucket is another bucket, with the write rate.
	if d := l.Take(c, Write, 0); !d.Allowed || d.Quota != 10 || d.Bucket != Write {
		t.Fatalf("write: %+v", d)
	}
}

func TestOwnRatesWinAndChangeInPlace(t *testing.T) {
	t.Parallel()
	l := New(Config{Read: 100})
	c := uuid.New()
	if d := l.Take(c, Read, 3); d.Quota != 6 || d.Remaining != 5 {
		t.Fatalf("own rate: %+v", d)
	}
	// Lowered: what is left is kept, capped by the new burst.
	if d := l.Take(c, Read, 1); d.Quota != 2 || d.Remaining > 1 {
		t.Fatalf("lowered: %+v", d)
	}
	if d := l.Peek(c, Read, 1); d.Quota != 2 || !d.Allowed {
		t.Fatalf("peek: %+v", d)
	}
	// A server default of 0 is off, but a client's own rate still applies.
	off := New(Config{})
	if d := off.Take(c, Write, 0); !d.Allowed || d.Bucket != "" {
		t.Fatalf("off: %+v", d)
	}
	if d := off.Take(c, Write, 1); d.Bucket != Write || d.Quota != 2 {
		t.Fatalf("own rate with the default off: %+v", d)
	}
}

func TestFailureBuckets(t *testing.T) {
	t.Parallel()
	l := New(Config{AuthFailures: 2, AuthWindow: time.Minute})
	if d := l.AuthAllowed("client-a", "192.0.2.1"); !d.Allowed {
		t.Fatalf("fresh: %+v", d)
	}
	l.AuthFailed("client-a", "192.0.2.1")
	l.AuthFailed("client-a", "192.0.2.1")
	d := l.AuthAllowed("client-a", "192.0.2.1")
	if d.Allowed || d.Bucket != AuthClient || d.RetryAfter < 29 || d.RetryAfter > 30 {
		t.Fatalf("client id locked at its source: %+v", d)
	}
	if d := l.AuthAllowed("client-a", "192.0.2.3"); !d.Allowed {
		t.Fatalf("the same client id from another source: %+v", d)
	}
	if d := l.AuthAllowed("client-b", "192.0.2.1"); !d.Allowed {
		t.Fatalf("another client from the same source: %+v", d)
	}
	// The source budget is 30 times the client's.
	for i := range 58 {
		l.AuthFailed("other-"+strconv.Itoa(i), "198.51.100.1")
	}
	if d := l.AuthAllowed("", "198.51.100.1"); !d.Allowed {
		t.Fatalf("source after 58 failures: %+v", d)
	}
	l.AuthFailed("", "198.51.100.1")
	l.AuthFailed("", "198.51.100.1")
	if d := l.AuthAllowed("fresh-client", "198.51.100.1"); d.Allowed || d.Bucket != AuthSource {
		t.Fatalf("source after 60 failures: %+v", d)
	}
	h := http.Header{}
	d.SetHeaders(h)
	if h.Get("Retry-After") == "" || h.Get("RateLimit") != "" {
		t.Fatalf("failure bucket headers: %v", h)
	}
	if off := New(Config{AuthFailures: 0}); !off.AuthAllowed("x", "y").Allowed {
		t.Fatal("failure buckets off, still refused")
	}
}

// fakeClock is a clock that moves only when the test moves it.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

// TestFailuresElsewhereNeverRefuseAClientID: failures are counted per
// client id and source, and per source; never per client id alone. Ten
// failures from one source, then one every 5 s (faster than the bucket
// refills), keep that source locked out for the client id, whatever the
// secret, but never another source that has none; a source that locks 30
// client ids locks them for itself only; a client id that failed at 100
// sources is still admitted at a 101st.
func TestFailuresElsewhereNeverRefuseAClientID(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	l := New(Config{AuthFailures: 10, AuthWindow: time.Minute, Now: clock.Now})
	for range 10 {
		l.AuthFailed("victim", "192.0.2.1")
	}
	for step := range 120 { // ten minutes
		if d := l.AuthAllowed("victim", "192.0.2.1"); d.Allowed || d.Bucket != AuthClient || d.RetryAfter < 1 {
			t.Fatalf("step %d: the guessing source admitted: %+v", step, d)
		}
		if d := l.AuthAllowed("victim", "198.51.100.1"); !d.Allowed {
			t.Fatalf("step %d: another source refused: %+v", step, d)
		}
		a, d := l.Attempt(context.Background(), "victim", "198.51.100.1")
		if !d.Allowed {
			t.Fatalf("step %d: an attempt from another source refused: %+v", step, d)
		}
		a.Release()
		clock.Advance(5 * time.Second)
		if l.AuthAllowed("victim", "192.0.2.1").Allowed {
			l.AuthFailed("victim", "192.0.2.1")
		}
	}
	// Once the guesser stops, its source is admitted after Retry-After.
	d := l.AuthAllowed("victim", "192.0.2.1")
	clock.Advance(time.Duration(d.RetryAfter) * time.Second)
	if d := l.AuthAllowed("victim", "192.0.2.1"); !d.Allowed {
		t.Fatalf("after Retry-After: %+v", d)
	}

	// One source locks 30 client ids, and so its own budget (300): it is
	// refused for every client id; the 30 are admitted elsewhere.
	for i := range 30 {
		for range 10 {
			l.AuthFailed("held-"+strconv.Itoa(i), "203.0.113.9")
		}
	}
	if d := l.AuthAllowed("fresh", "203.0.113.9"); d.Allowed || d.Bucket != AuthSource {
		t.Fatalf("the source after 300 failures: %+v", d)
	}
	for i := range 30 {
		if d := l.AuthAllowed("held-"+strconv.Itoa(i), "203.0.113.10"); !d.Allowed {
			t.Fatalf("held-%d refused at another source: %+v", i, d)
		}
	}

	// No bucket of a client id alone: failures at 100 sources leave a
	// 101st untouched.
	for i := range 100 {
		for range 10 {
			l.AuthFailed("spread", "10.0.0."+strconv.Itoa(i))
		}
	}
	if d := l.AuthAllowed("spread", "10.0.0.0"); d.Allowed {
		t.Fatal("a source that used its budget admitted")
	}
	if d := l.AuthAllowed("spread", "10.0.1.0"); !d.Allowed {
		t.Fatalf("a source that never failed refused: %+v", d)
	}
}

func TestMemoryIsBounded(t *testing.T) {
	t.Parallel()
	l := New(Config{AuthFailures: 1, MaxKeys: 100, Read: 1})
	for i := range 10_000 {
		l.AuthFailed("c"+strconv.Itoa(i), "")
		l.Take(uuid.New(), Read, 0)
	}
	if len(l.failures) > 100 || len(l.clients) > 100 {
		t.Fatalf("%d failure buckets, %d client buckets; bound 100", len(l.failures), len(l.clients))
	}
}

// TestFloodDoesNotResetALockout fills the failure buckets past their
// bound with new client ids from many sources: the client id locked out
// at a source before the flood stays locked out there (an arbitrary
// eviction would hand a guesser a fresh budget), and a client at its read
// rate stays there.
func TestFloodDoesNotResetALockout(t *testing.T) {
	t.Parallel()
	// A still clock: the read bucket must not refill while the flood runs.
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	l := New(Config{AuthFailures: 3, AuthWindow: time.Hour, MaxKeys: 50, Read: 1, Now: clock.Now})
	for range 3 {
		l.AuthFailed("victim", "192.0.2.1")
	}
	if d := l.AuthAllowed("victim", "192.0.2.1"); d.Allowed {
		t.Fatal("victim not locked out at the guessing source")
	}
	busy := uuid.New()
	for l.Take(busy, Read, 0).Allowed {
	}
	for i := range 5_000 {
		l.AuthFailed("flood-"+strconv.Itoa(i), "198.51.100."+strconv.Itoa(i%250))
		l.Take(uuid.New(), Read, 0)
	}
	if len(l.failures) > 50 || len(l.clients) > 50 {
		t.Fatalf("%d failure buckets, %d client buckets; bound 50", len(l.failures), len(l.clients))
	}
	if d := l.AuthAllowed("victim", "192.0.2.1"); d.Allowed {
		t.Fatal("the flood reset the victim's lockout at the guessing source")
	}
	if d := l.AuthAllowed("victim", "203.0.113.7"); !d.Allowed {
		t.Fatalf("the victim refused at a source that never failed: %+v", d)
	}
	if d := l.Take(busy, Read, 0); d.Allowed {
		t.Fatal("the flood refilled a client's read bucket")
	}
}

func TestSources(t *testing.T) {
	t.Parallel()
	trusted, err := ParseTrusted("10.0.0.0/8, 192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseTrusted("10.0.0.0/33"); err == nil {
		t.Fatal("bad CIDR accepted")
	}
	s := Sources{Trusted: trusted}
	for _, tc := range []struct {
		remote, xff, want string
	}{
		{"203.0.113.9:4000", "", "203.0.113.9"},
		{"203.0.113.9:4000", "198.51.100.7", "203.0.113.9"}, // untrusted peer: header ignored
		{"10.1.2.3:4000", "198.51.100.7", "198.51.100.7"},
		{"10.1.2.3:4000", "6.6.6.6, 198.51.100.7, 10.9.9.9", "198.51.100.7"}, // rightmost untrusted
		{"192.0.2.1:4000", "garbage, 198.51.100.8", "198.51.100.8"},
		{"10.1.2.3:4000", "10.2.2.2", "10.2.2.2"}, // only proxies: the leftmost
		{"[2001:db8:1:2:3:4:5:6]:4000", "", "2001:db8:1:2::/64"},
		{"[::ffff:203.0.113.9]:4000", "", "203.0.113.9"},
		// Proxies that write the client's port, or brackets.
		{"10.1.2.3:4000", "198.51.100.7:51234", "198.51.100.7"},
		{"10.1.2.3:4000", "[2001:db8:1:2::9]:51234", "2001:db8:1:2::/64"},
		{"10.1.2.3:4000", "[2001:db8:1:3::9]", "2001:db8:1:3::/64"},
		{"10.1.2.3:4000", "198.51.100.7, 10.2.2.2:80", "198.51.100.7"},
		{"10.1.2.3:4000", "[::ffff:198.51.100.8]:1", "198.51.100.8"},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := s.Of(r); got != tc.want {
			t.Errorf("%s via %q: %q, want %q", tc.remote, tc.xff, got, tc.want)
		}
	}
}

// TestAttemptsHoldTheirPlace: requests whose secrets are still being
// checked count against the failure buckets, so concurrent guesses cannot
// exceed the budget; a success gives its place back.
func TestAttemptsHoldTheirPlace(t *testing.T) {
	t.Parallel()
	l := New(Config{AuthFailures: 3, AuthWindow: time.Hour})
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	var admitted []*Attempt
	for range 50 {
		a, d := l.Attempt(short(), "client-a", "192.0.2.1")
		if d.Allowed {
			admitted = append(admitted, a)
		} else if d.Bucket != AuthClient || d.RetryAfter < 1 {
			t.Fatalf("refusal %+v", d)
		}
	}
	if len(admitted) != 3 {
		t.Fatalf("%d attempts admitted at once with a budget of 3", len(admitted))
	}
	// The early check (before a body is read) refuses only an empty bucket:
	// places held by attempts still being checked are not failures.
	if d := l.AuthAllowed("client-a", "192.0.2.1"); !d.Allowed {
		t.Fatalf("AuthAllowed refused while nothing has failed: %+v", d)
	}
	// The places are held at this source only.
	if a, d := l.Attempt(short(), "client-a", "198.51.100.1"); !d.Allowed {
		t.Fatalf("refused at another source: %+v", d)
	} else {
		a.Release()
	}
	// A success releases its place: one more may try.
	admitted[0].Release()
	admitted[0].Failed() // after Release: nothing
	a, d := l.Attempt(short(), "client-a", "192.0.2.1")
	if !d.Allowed {
		t.Fatalf("refused after a release: %+v", d)
	}
	a.Failed()
	a.Release() // after Failed: nothing
	admitted[1].Failed()
	admitted[2].Failed()
	if d := l.AuthAllowed("client-a", "192.0.2.1"); d.Allowed || d.Bucket != AuthClient {
		t.Fatalf("after three failures: %+v", d)
	}
	if d := l.AuthAllowed("client-a", "198.51.100.2"); !d.Allowed {
		t.Fatalf("after three failures elsewhere: %+v", d)
	}
	if len(l.checking) != 0 {
		t.Fatalf("attempts left behind: %v", l.checking)
	}
	// Off: nothing is held, and ending a nil attempt is harmless.
	off := New(Config{})
	a, d = off.Attempt(context.Background(), "x", "y")
	if !d.Allowed || a != nil {
		t.Fatalf("off: %v %+v", a, d)
	}
	a.Failed()
	a.Release()
}

// TestAttemptsWaitForAPlaceInsteadOfFailing: while every place left is
// held by attempts being checked, a new attempt waits and is admitted
// when one ends without failing, so a burst of right secrets is delayed,
// never refused; a waiter whose request ends first is refused.
func TestAttemptsWaitForAPlaceInsteadOfFailing(t *testing.T) {
	t.Parallel()
	l := New(Config{AuthFailures: 2, AuthWindow: time.Hour})
	first, _ := l.Attempt(context.Background(), "client-b", "203.0.113.1")
	second, _ := l.Attempt(context.Background(), "client-b", "203.0.113.1")
	done := make(chan Decision, 1)
	go func() {
		a, d := l.Attempt(context.Background(), "client-b", "203.0.113.1")
		a.Release()
		done <- d
	}()
	select {
	case d := <-done:
		t.Fatalf("a third attempt was decided (%+v) while two held both places", d)
	case <-time.After(50 * time.Millisecond):
	}
	first.Release()
	if d := <-done; !d.Allowed {
		t.Fatalf("the waiting attempt was refused after a place came free: %+v", d)
	}
	// Both places held again: a waiter whose request ends first is refused.
	held, _ := l.Attempt(context.Background(), "client-b", "203.0.113.1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if a, d := l.Attempt(ctx, "client-b", "203.0.113.1"); d.Allowed || a != nil || d.RetryAfter < 1 {
		t.Fatalf("admitted past the places held: %+v", d)
	}
	second.Failed()
	held.Failed()
	if d := l.AuthAllowed("client-b", "203.0.113.1"); d.Allowed {
		t.Fatalf("two failures with a budget of two: %+v", d)
	}
}

// TestRetryAfterIsTheLaterBucket: when the source and the client id are
// both locked, Retry-After is the later of the two, so a request retried
// then is not refused by the other bucket.
func TestRetryAfterIsTheLaterBucket(t *testing.T) {
	t.Parallel()
	l := New(Config{AuthFailures: 1, AuthWindow: time.Minute})
	l.AuthFailed("client-a", "192.0.2.1")
	for range 29 {
		l.AuthFailed("", "192.0.2.1")
	}
	// The source refills one failure every 2 s, the client id every 60 s.
	d := l.AuthAllowed("client-a", "192.0.2.1")
	if d.Allowed || d.Bucket != AuthClient || d.RetryAfter < 59 {
		t.Fatalf("both locked: %+v", d)
	}
	if d := l.AuthAllowed("client-b", "192.0.2.1"); d.Allowed || d.Bucket != AuthSource || d.RetryAfter > 2 {
		t.Fatalf("source locked: %+v", d)
	}
}
