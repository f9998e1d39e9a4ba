package requestid

import (
	"math/bits"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"testing"
)

func TestMiddleware(t *testing.T) {
	t.Parallel()
	var seen string
	h := Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = FromContext(r.Context()) }))
	ids := map[string]bool{}
	for range 100 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		id := w.Header().Get(Header)
		if id == "" || id != seen || ids[id] || len(id) > 64 {
			t.Fatalf("id %q (context %q) empty, repeated or inconsistent", id, seen)
		}
		ids[id] = true
	}
	for in, keep := range map[string]bool{"abc-123_X.y": true, "has space": false, "": false, string(make([]byte, 65)): false} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(Header, in)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := w.Header().Get(Header); (got == in) != keep {
			t.Errorf("caller id %q: response id %q, keep = %v", in, got, keep)
		}
	}
}

// TestIDsAreRandomNotACounter: server-issued ids are "req_" and 26
// base32 characters holding 128 random bits. They never repeat, share no
// prefix or fixed bits, do not increase, and two consecutive ids differ
// in about half their bits: a tenant learns nothing about other traffic
// from them and cannot guess the next one (a process prefix and a
// counter gave both away).
func TestIDsAreRandomNotACounter(t *testing.T) {
	t.Parallel()
	const n = 10000
	format := regexp.MustCompile(`^req_[0-9a-hjkmnp-tv-z]{26}$`)
	ids := make([]string, n)
	raw := make([][]byte, n)
	seen := make(map[string]bool, n)
	var ones [128]int
	increases := 0
	for i := range ids {
		id := New()
		if !format.MatchString(id) || !acceptable(id) {
			t.Fatalf("id %q: want req_ and 26 of 0-9a-z but i, l, o, u, and acceptable back as a caller's id", id)
		}
		if seen[id] {
			t.Fatalf("id %q issued twice", id)
		}
		seen[id] = true
		b, err := enc.DecodeString(id[len(prefix):])
		if err != nil || len(b) != 16 {
			t.Fatalf("id %q does not hold 16 bytes: %v", id, err)
		}
		ids[i], raw[i] = id, b
		for j := range 128 {
			ones[j] += int(b[j/8] >> (7 - j%8) & 1)
		}
		if i > 0 {
			if id > ids[i-1] {
				increases++
			}
			if d := hamming(b, raw[i-1]); d < 24 {
				t.Errorf("consecutive ids %s and %s differ in only %d of 128 bits", ids[i-1], id, d)
			}
		}
	}
	// Each bit is set in about half the ids: no fixed prefix, no counter
	// bits stuck at zero. (σ is 50 ids; 1000 is 20σ.)
	for j, c := range ones {
		if c < n/2-1000 || c > n/2+1000 {
			t.Errorf("bit %d is set in %d of %d ids, want about half", j, c, n)
		}
	}
	if increases < n*4/10 || increases > n*6/10 {
		t.Errorf("%d of %d ids sort after the one before, want about half: ids follow a sequence", increases, n-1)
	}
	// Sorted, neighbours share a few characters by chance (log32(n) ≈ 3),
	// never the 16 of a process prefix.
	sort.Strings(ids)
	for i := 1; i < n; i++ {
		if p := commonPrefix(ids[i-1], ids[i]) - len(prefix); p > 8 {
			t.Errorf("ids %s and %s share %d characters after %q", ids[i-1], ids[i], p, prefix)
		}
	}
}

func hamming(a, b []byte) int {
	d := 0
	for i := range a {
		d += bits.OnesCount8(a[i] ^ b[i])
	}
	return d
}

func commonPrefix(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// BenchmarkNew is the id of every request that does not bring its own.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if len(New()) != idLen {
			b.Fatal("length")
		}
	}
}
