package auth

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/internal/security/secret"
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

// sharedStore is the database as the caches see it: tests flip a token's
// revocation and then notify, as the triggers do.
type sharedStore struct {
	mu      sync.Mutex
	records map[secret.Hash]Record
}

func (s *sharedStore) LookupToken(_ context.Context, h secret.Hash) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[h]
	if !ok {
		return Record{}, ErrInvalidToken
	}
	return r, nil
}

func (s *sharedStore) setRevoked(h secret.Hash, revoked bool) {
	s.mu.Lock()
	r := s.records[h]
	r.Revoked = revoked
	s.records[h] = r
	s.mu.Unlock()
}

// runCache starts a cache's feed on d and waits until it is trusted.
func runCache(t *testing.T, d *db.DB, store Store) *Cache {
	t.Helper()
	c := &Cache{Store: store, DB: d}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	dbtest.Eventually(t, 10*time.Second, "the cache feed proven alive", c.Live)
	return c
}

// heardFrom reports whether c has received a heartbeat of other: only
// then does c's Sync wait for other's acknowledgement.
func heardFrom(c, other *Cache) bool {
	c.feedMu.Lock()
	defer c.feedMu.Unlock()
	_, ok := c.peers[other.id]
	return ok
}

// TestCacheBarrierConcurrent runs two replicas' caches on one database
// and, from many goroutines at once, caches a token on one replica,
// changes it, notifies, and calls Sync on the other: the first replica
// must answer the new state right after Sync returns, and Sync must return
// fast while every feed is alive. Run under -race, it also checks the
// barrier's bookkeeping.
func TestCacheBarrierConcurrent(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	store := &sharedStore{records: map[secret.Hash]Record{}}
	a, b := runCache(t, d, store), runCache(t, d, store)
	// Each replica must know the other from its heartbeats before Sync can
	// count it.
	dbtest.Eventually(t, 10*time.Second, "each replica to hear the other's heartbeat",
		func() bool { return heardFrom(a, b) && heardFrom(b, a) })
	ctx := context.Background()

	const workers, rounds = 8, 15
	errs := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			_, h := secret.NewToken()
			client := uuid.New()
			store.mu.Lock()
			store.records[h] = Record{Principal: Principal{ClientID: client, WorkspaceID: uuid.New(), Scopes: scope.All,
				ExpiresAt: time.Now().Add(time.Hour)}, ClientActive: true}
			store.mu.Unlock()
			reader, writer := b, a
			if w%2 == 1 {
				reader, writer = a, b
			}
			for r := range rounds {
				revoked := r%2 == 0
				if _, err := reader.LookupToken(ctx, h); err != nil { // cache the current state
					errs <- err
					return
				}
				store.setRevoked(h, revoked)
				if err := db.Q.AuthFeedNotify(ctx, d.Conn(), "c:"+client.String()); err != nil {
					errs <- err
					return
				}
				start := time.Now()
				writer.Sync(ctx)
				if took := time.Since(start); took > time.Second {
					errs <- fmt.Errorf("worker %d round %d: Sync took %v with every feed alive", w, r, took)
				}
				rec, err := reader.LookupToken(ctx, h)
				if err != nil || rec.Revoked != revoked {
					errs <- fmt.Errorf("worker %d round %d: after Sync the other replica answers revoked=%v (%v), want %v", w, r, rec.Revoked, err, revoked)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCacheUntrustedWithoutHeartbeat: a cache whose heartbeats stop coming
// back is bypassed once the trust window has passed. The cache reads the
// time only through the clock, so the test runs it in a synctest bubble
// and moves the bubble's fake clock past the window.
func TestCacheUntrustedWithoutHeartbeat(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &Cache{Store: mapStore{}, Trust: 200 * time.Millisecond}
		c.goLive()
		c.Trust = 200 * time.Millisecond
		c.proven.Store(c.since())
		if !c.Live() {
			t.Fatal("not trusted right after a heartbeat")
		}
		time.Sleep(199 * time.Millisecond) // synctest: moves the bubble's fake clock
		if !c.Live() {
			t.Fatal("not trusted 199 ms after the last heartbeat, with a 200 ms window")
		}
		time.Sleep(time.Millisecond) // synctest: moves the bubble's fake clock
		if c.Live() {
			t.Fatal("still trusted 200 ms after the last heartbeat, with a 200 ms window")
		}
		if c.handle("h:" + c.id + ":" + fmt.Sprint(c.since())); !c.Live() {
			t.Fatal("not trusted again after a fresh heartbeat")
		}
		// Another replica's heartbeat proves nothing about this feed.
		time.Sleep(250 * time.Millisecond) // synctest: moves the bubble's fake clock
		c.handle("h:other:" + fmt.Sprint(c.since()))
		if c.Live() {
			t.Fatal("trusted on another replica's heartbeat")
		}
	})
}
