package servertest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svat/partnerapi/db/dbtest"
)

// Walk follows nextCursor to the end and returns the ids in order.
func Walk(t testing.TB, h *Harness, token, path string, q url.Values) []string {
	t.Helper()
	return WalkUntil(t, h, token, path, q, nil)
}

// WalkUntil is [Walk], but a sort=updatedAt walk whose last page leaves
// done unsatisfied goes on from its syncCursor, as a syncing client does,
// for up to 10 s: such a walk withholds changes newer than a write
// transaction still open anywhere in the cluster (a parallel test's
// CREATE DATABASE, say) until it ends.
func WalkUntil(t testing.TB, h *Harness, token, path string, q url.Values, done func([]string) bool) []string {
	t.Helper()
	var out []string
	pages := 0
	// next reads one page into out and reports its sync cursor once the
	// walk has reached the end.
	next := func() (syncCursor *string) {
		for {
			if pages++; pages > 2000 {
				t.Fatal("walk does not end")
			}
			status, _, b := h.Do(http.MethodGet, path+"?"+q.Encode(), token, "", "")
			if status != 200 {
				t.Fatalf("GET %s?%s: %d %s", path, q.Encode(), status, b)
			}
			var p Page
			MustUnmarshal(t, b, &p)
			for _, c := range p.Contacts {
				out = append(out, c.ID)
			}
			for _, l := range p.Leads {
				out = append(out, l.ID)
			}
			if p.Pagination.NextCursor != nil && p.Pagination.SyncCursor != nil {
				t.Fatalf("page with both nextCursor and syncCursor: %s", b)
			}
			if p.Pagination.NextCursor == nil {
				return p.Pagination.SyncCursor
			}
			q.Set("cursor", *p.Pagination.NextCursor)
		}
	}
	cursor := next()
	if cursor == nil || done == nil {
		return out
	}
	dbtest.Until(10*time.Second, func() bool {
		if done(out) {
			return true
		}
		q.Set("cursor", *cursor)
		if c := next(); c != nil {
			cursor = c
		}
		return done(out)
	})
	return out
}

// Call is an HTTP request to an absolute URL that reports failure instead
// of failing the test, for goroutines a test spawns; a body is sent as
// JSON.
func Call(method, u, token, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("build %s %s: %w", method, u, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, b, fmt.Errorf("read %s %s: %w", method, u, err)
	}
	return res.StatusCode, b, nil
}

// LogBuffer collects a server's log lines; the server writes from its
// own goroutines while the test reads.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *LogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *LogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
