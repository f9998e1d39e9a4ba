package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/svat/partnerapi/db"
)

// barrier is one [Cache.Sync] in progress on this replica.
type barrier struct {
	arrived bool            // the barrier came back on this replica's own feed
	need    map[string]bool // replicas whose acknowledgement is awaited
	done    chan struct{}
}

// arrivedLocked marks a barrier of this replica as back on its own feed:
// this cache has applied everything committed before it, and every
// replica that may still trust a cache missing it has sent a heartbeat that
// arrived here within the trust window. Those are the ones to wait for.
func (c *Cache) arrivedLocked(b *barrier) {
	b.arrived = true
	cutoff := time.Now().Add(-c.trust())
	for replica, seen := range c.peers {
		if replica != c.id && seen.After(cutoff) {
			if _, acked := b.need[replica]; !acked {
				b.need[replica] = true
			}
		}
	}
	for replica, waiting := range b.need {
		if !waiting { // acknowledged before the barrier came back here
			delete(b.need, replica)
		}
	}
	if len(b.need) == 0 {
		close(b.done)
		for id, x := range c.barriers {
			if x == b {
				delete(c.barriers, id)
			}
		}
	}
}

// acknowledge sends the acknowledgements the listener queued.
func (c *Cache) acknowledge(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ack := <-c.acks:
			actx, cancel := context.WithTimeout(ctx, c.trust())
			_ = db.Q.AuthFeedNotify(actx, c.DB.Conn(), ack)
			cancel()
		}
	}
}

// Sync returns once no replica can still answer from a cache that misses
// an invalidation committed before the call. A replica calls it after a
// change that invalidates tokens and before it answers, so the caller's
// next request, on any replica, is judged by the new state.
//
// It sends a barrier through the feed. When the barrier comes back on this
// replica's own feed, this cache is up to date, and the replicas whose
// heartbeats arrived within the trust window are the ones that may trust
// their caches: Sync waits for their acknowledgements, each sent after
// applying everything before the barrier. A replica that does not
// acknowledge has received no heartbeat of its own sent after the
// barrier's commit, so by the barrier's commit plus Trust it no longer
// trusts its cache; Sync never waits longer than that. Counting needs no
// catalog view, so it works for any database role.
func (c *Cache) Sync(ctx context.Context) {
	c.init()
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	b := &barrier{need: map[string]bool{}, done: make(chan struct{})}
	c.feedMu.Lock()
	c.barriers[id] = b
	c.feedMu.Unlock()
	defer func() {
		c.feedMu.Lock()
		delete(c.barriers, id)
		c.feedMu.Unlock()
	}()
	// Acknowledgements may arrive before the barrier is back here; they are
	// recorded as not needed (false) until then.
	err := db.Q.AuthFeedNotify(ctx, c.DB.Conn(), "b:"+id)
	// Sent or not, the change committed before now: the deadline holds.
	deadline := time.NewTimer(c.trust() + syncMargin)
	defer deadline.Stop()
	if err != nil {
		if c.Log != nil {
			c.Log.Warn("send token cache barrier; waiting out the trust window", "err", err)
		}
		b = nil
	}
	var done chan struct{}
	if b != nil {
		done = b.done
	}
	select {
	case <-done:
	case <-ctx.Done():
	case <-deadline.C:
		c.feedMu.Lock()
		missing := 0
		if b != nil {
			missing = len(b.need)
		}
		c.feedMu.Unlock()
		if c.Log != nil {
			c.Log.Info("token cache barrier not acknowledged by every replica; those no longer trust their caches",
				"missing", missing)
		}
	}
}

// syncMargin covers scheduling between a replica's own trust check and
// the sender's deadline.
const syncMargin = 50 * time.Millisecond
