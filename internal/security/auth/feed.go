package auth

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/svat/partnerapi/db"
)

// Run keeps the feed until ctx ends: the listening session, reconnected
// with backoff, the heartbeats and the acknowledgements. The cache is
// trusted only while it runs.
func (c *Cache) Run(ctx context.Context) error {
	c.init()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { c.listen(ctx); return nil })
	g.Go(func() error { c.beat(ctx); return nil })
	g.Go(func() error { c.acknowledge(ctx); return nil })
	return g.Wait()
}

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

func (c *Cache) listen(ctx context.Context) {
	backoff := minBackoff
	var n uint64
	for ctx.Err() == nil {
		n++
		proven, err := c.listenOnce(ctx, n)
		c.session.Store(0)
		c.reset()
		if ctx.Err() != nil {
			return
		}
		if proven {
			// The session had worked: this is a new failure, not a streak.
			backoff = minBackoff
		}
		if c.Log != nil {
			c.Log.Warn("token cache feed lost; the cache is bypassed until it is proven alive again", "err", err, "retry_in", backoff.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

var errSilent = errors.New("no heartbeat of this replica arrived")

// listenOnce runs one listening session until it fails or falls silent.
// proven reports whether a heartbeat came back on it.
func (c *Cache) listenOnce(ctx context.Context, n uint64) (proven bool, err error) {
	l, err := c.DB.Listen(ctx, db.Q.AuthFeedListen)
	if err != nil {
		return false, err
	}
	defer l.Close()
	// Anything cached before this point may have missed a notification, and
	// the session is trusted only once a heartbeat sent after it began
	// listening comes back on it.
	c.reset()
	c.proven.Store(-1 << 62)
	c.opened.Store(c.since())
	c.pid.Store(l.PID())
	c.session.Store(n)
	c.poke()
	lastProof := time.Now()
	for {
		wctx, cancel := context.WithDeadlineCause(ctx, lastProof.Add(c.silence()), errSilent)
		payload, err := l.Wait(wctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && context.Cause(wctx) == errSilent {
				err = fmt.Errorf("%w for %s", errSilent, c.silence())
			}
			return proven, err
		}
		if c.handle(payload) {
			proven = true
			lastProof = time.Now()
		}
	}
}

// poke asks for a heartbeat now, so a new session is proven within a round
// trip.
func (c *Cache) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// beat sends this replica's heartbeats while its listening session is
// open.
func (c *Cache) beat(ctx context.Context) {
	t := time.NewTicker(c.heartbeat())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.wake:
		}
		c.feedMu.Lock()
		for replica, seen := range c.peers {
			if time.Since(seen) > time.Minute {
				delete(c.peers, replica)
			}
		}
		c.feedMu.Unlock()
		if c.session.Load() == 0 {
			continue
		}
		sent := c.since()
		hctx, cancel := context.WithTimeout(ctx, c.trust())
		err := db.Q.AuthFeedNotify(hctx, c.DB.Conn(), "h:"+c.id+":"+strconv.FormatInt(sent, 10))
		cancel()
		if err != nil && ctx.Err() == nil && c.Log != nil {
			c.Log.Debug("send token cache heartbeat", "err", err)
		}
	}
}
