// Package usage keeps API clients' last_used_at current without a database
// write per request: a client is marked at most once per interval, and the
// marks are flushed in one UPDATE.
package usage

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
)

type key struct{ workspace, client uuid.UUID }

// Recorder batches last-used marks.
type Recorder struct {
	DB       *db.DB
	Interval time.Duration // default one minute
	Log      *slog.Logger
	Now      func() time.Time

	seen    sync.Map // key -> time.Time of the last mark
	mu      sync.Mutex
	pending map[key]time.Time
}

func (r *Recorder) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return time.Minute
}

func (r *Recorder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Touch marks a client as used now. It is cheap when the client was marked
// within the interval: one map read.
func (r *Recorder) Touch(workspaceID, clientID uuid.UUID) {
	k := key{workspaceID, clientID}
	now := r.now()
	if last, ok := r.seen.Load(k); ok && now.Sub(last.(time.Time)) < r.interval() {
		return
	}
	r.seen.Store(k, now)
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[key]time.Time{}
	}
	r.pending[k] = now
	r.mu.Unlock()
}

// Flush writes the pending marks in one statement.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	batch := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	p := dbsqlc.APIClientTouchParams{}
	for k, t := range batch {
		p.WorkspaceIDs = append(p.WorkspaceIDs, k.workspace)
		p.IDs = append(p.IDs, k.client)
		p.UsedAts = append(p.UsedAts, t)
	}
	return db.Q.APIClientTouch(ctx, r.DB.Conn(), p)
}

// Run flushes every interval until ctx ends, then flushes once more.
func (r *Recorder) Run(ctx context.Context) {
	t := time.NewTicker(r.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := r.Flush(context.WithoutCancel(ctx)); err != nil && r.Log != nil {
				r.Log.Warn("flush client usage", "err", err)
			}
			return
		case <-t.C:
			if err := r.Flush(ctx); err != nil && r.Log != nil {
				r.Log.Warn("flush client usage", "err", err)
			}
		}
	}
}
