// Reads on standbys: a second pool, on hot standbys (Config.ReadURL), for
// the requests that only read records (GETs, lists, sync and the events
// feed), and the rule that keeps a client's reads after its writes.

package db

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db/dbsqlc"
)

// DefaultReadWait is how long a read waits for a standby to replay the
// primary's position before it goes to the primary: a standby streaming
// on the same network replays within a millisecond or two, and a read
// should not pay more than that for one that lags.
const DefaultReadWait = 5 * time.Millisecond

// readPoll is how often a lagging standby is asked again within the wait.
const readPoll = time.Millisecond

// standbyReach bounds a read's wait to reach a standby (a connection
// from its pool, or a new one) and for its first answer.
const standbyReach = 250 * time.Millisecond

// standbyRest is how long reads skip a standby that failed (could not be
// reached, or an error): they go to the primary meanwhile, instead of each
// waiting for a standby that is down.
const standbyRest = time.Second

// reads is the standby side of a [DB]: its pool, and where the primary
// was last seen.
type reads struct {
	standby *DB
	wait    time.Duration
	mark    marker
	// restUntil is when (UnixNano) a failed standby is tried again.
	restUntil atomic.Int64
	// onStandby and onPrimary count the reads served by each.
	onStandby, onPrimary atomic.Uint64
	// shares bounds each tenant's connections of the standby pool, as
	// Config.TenantShare says; nil: unbounded.
	shares *shares
}

// openReads opens the pool on the standbys at c.ReadURL. Its connections
// write nothing (no history note: a standby refuses writes, and a
// prefer-standby URL may reach a primary that is not the service's).
func openReads(ctx context.Context, primary *DB, c Config) (*reads, error) {
	cfg, err := pgxpool.ParseConfig(c.ReadURL)
	if err != nil {
		return nil, fmt.Errorf("parse read database url: %w", err)
	}
	if c.MaxConns > 0 {
		cfg.MaxConns = c.MaxConns
	} else if !strings.Contains(c.ReadURL, "pool_max_conns") {
		cfg.MaxConns = primary.MaxConns()
	}
	cfg.ConnConfig.Tracer = tracer{}
	configure(cfg.ConnConfig, c.ReadURL, c)
	if !strings.Contains(c.ReadURL, "default_query_exec_mode") {
		// A standby is reached directly: statements are prepared and
		// cached per connection, as on the primary without a pooler.
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	}
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		registerTypes(conn.TypeMap())
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open read database pool: %w", err)
	}
	wait := c.ReadWait
	if wait == 0 {
		wait = DefaultReadWait
	}
	// The standby pool's tenant shares are its own (see onStandbyAt), so
	// that a request's claims on the two pools never mix.
	r := &reads{standby: newDB(pool, cfg.ConnConfig.Copy(), c), wait: max(wait, 0)}
	r.shares, r.standby.shares = r.standby.shares, nil
	r.mark.primary = primary
	return r, nil
}

// Reader is where one request's reads run: the primary's pool, or one
// connection of a standby that has replayed every write acknowledged
// before the request arrived. Close gives that connection back.
type Reader struct {
	conn, planned DBTX
	release       func()
	standby       bool
}

// Conn runs single statements, as [DB.Conn].
func (r Reader) Conn() DBTX { return r.conn }

// Planned runs single statements planned with their parameters, as
// [DB.Planned].
func (r Reader) Planned() DBTX { return r.planned }

// Standby reports whether the reads go to a standby.
func (r Reader) Standby() bool { return r.standby }

// Close ends the reads; the Reader is not used after.
func (r Reader) Close() {
	if r.release != nil {
		r.release()
	}
}

// Reader returns where the reads of a request that arrived before the
// call run. Without a read pool (Config.ReadURL) it is the primary's pool,
// as [DB.Conn] and [DB.Planned], at no cost.
//
// With one, a read goes to a standby only if the standby shows everything
// the primary had when this call began: it is on the primary's timeline
// and has replayed the primary's WAL insert position read after the call
// began. Every write acknowledged before the request arrived, by any
// replica of the service, ends before that position, so a client always
// reads its own writes (and everyone else's acknowledged before). The
// position is read once for all the reads waiting for it (one statement
// on the primary in flight at a time). A standby behind it is asked again
// for up to Config.ReadWait; then, or when it fails, the reads go to the
// primary. What a standby serves is as gap-free as what the primary does:
// the sync and events pages follow the standby's own snapshot, and their
// cursors carry the standby's timeline and position (migration 00114).
// The error is the primary's, when its position cannot be read.
func (d *DB) Reader(ctx context.Context) (Reader, error) {
	r := d.reads
	if r == nil {
		return Reader{conn: d.conn, planned: d.planned}, nil
	}
	m, err := r.mark.get(ctx)
	if err != nil {
		return Reader{}, err
	}
	// Timeline 0: the primary's URL reached a standby (a switchover under
	// way); no standby is known to be caught up with it.
	if m.Timeline != 0 {
		if rd, ok := r.onStandbyAt(ctx, m); ok {
			r.onStandby.Add(1)
			return rd, nil
		}
	}
	if err := context.Cause(ctx); err != nil {
		return Reader{}, err
	}
	r.onPrimary.Add(1)
	return Reader{conn: d.conn, planned: d.planned}, nil
}

// onStandbyAt returns a Reader on a standby connection that shows what
// the primary had at m, waiting up to r.wait for one to replay it.
func (r *reads) onStandbyAt(ctx context.Context, m dbsqlc.ReplicaMarkRow) (Reader, bool) {
	if time.Now().UnixNano() < r.restUntil.Load() {
		return Reader{}, false
	}
	s := r.standby
	leave, err := r.claim(ctx)
	if err != nil {
		// The tenant's share of the standbys is in use: its reads
		// spill over to the primary (and its share there), at once.
		return Reader{}, false
	}
	// Reaching the standby and its first answer get a time of their own,
	// short and cut by the request's deadline: a frozen or unreachable
	// standby costs a read standbyReach, then the primary serves it and
	// reads rest from the standby, whatever deadline the client sent.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), standbyReach+r.wait)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		var cut context.CancelFunc
		sctx, cut = context.WithDeadline(sctx, dl)
		defer cut()
	}
	c, release, err := s.acquireConn(sctx)
	if err != nil {
		if leave != nil {
			leave()
		}
		// A pool whose every connection is in use is busy, not failed:
		// no rest for that.
		if st := s.pool.Stat(); st.TotalConns() < st.MaxConns() {
			r.rest(ctx)
		}
		return Reader{}, false
	}
	if leave != nil {
		release = func() { c.Release(); leave() }
	}
	b := bounded{d: s, inner: c, conn: c.Conn()}
	arg := dbsqlc.ReplicaCaughtUpParams(m)
	var deadline time.Time
	for {
		ok, err := Q.ReplicaCaughtUp(sctx, b, arg)
		if err != nil {
			release()
			r.rest(ctx)
			return Reader{}, false
		}
		if ok {
			p := b
			p.mode = s.plannedMode
			return Reader{conn: b, planned: p, release: release, standby: true}, true
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(r.wait)
		}
		if !now.Before(deadline) || !sleep(sctx, min(readPoll, deadline.Sub(now))) {
			release()
			return Reader{}, false
		}
	}
}

// claim enters the share of the standby pool of ctx's tenant, on a hold
// of its own: the request's hold in ctx counts its primary connections,
// and one count across both pools would give a slot back to the pool
// that did not take it.
func (r *reads) claim(ctx context.Context) (func(), error) {
	h, ok := ctx.Value(tenantKey{}).(*tenantHold)
	if !ok || r.shares == nil {
		return nil, nil
	}
	own := &tenantHold{Tenant: h.Tenant}
	if err := r.shares.enter(ctx, own, 0); err != nil {
		return nil, err
	}
	return func() { r.shares.leave(own) }, nil
}

// rest makes reads skip the standby for a while after it failed, unless
// the request itself ran out of time.
func (r *reads) rest(ctx context.Context) {
	if ctx.Err() == nil {
		r.restUntil.Store(time.Now().Add(standbyRest).UnixNano())
	}
}

// sleep waits d, or until ctx is done (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ReadStat counts the reads [DB.Reader] sent to a standby and to the
// primary since the pool opened; both zero without a read pool.
func (d *DB) ReadStat() (standby, primary uint64) {
	if d.reads == nil {
		return 0, 0
	}
	return d.reads.onStandby.Load(), d.reads.onPrimary.Load()
}

// HasReadPool reports whether reads may go to standbys.
func (d *DB) HasReadPool() bool { return d.reads != nil }

// marker reads the primary's position for the reads that arrived before
// the statement began, one statement at a time: a read that arrives while
// one is in flight joins the next, which begins when it ends. So a read
// waits at most two round trips to the primary, and the primary answers
// one such statement at a time however many reads arrive.
type marker struct {
	primary *DB
	mu      sync.Mutex
	running bool
	next    *flight
}

// flight is one reading of the primary's position.
type flight struct {
	done chan struct{}
	row  dbsqlc.ReplicaMarkRow
	err  error
}

func (m *marker) get(ctx context.Context) (dbsqlc.ReplicaMarkRow, error) {
	m.mu.Lock()
	f := m.next
	if f == nil {
		f = &flight{done: make(chan struct{})}
		m.next = f
	}
	if !m.running {
		m.running = true
		m.next = nil
		go m.run(f)
	}
	m.mu.Unlock()
	select {
	case <-f.done:
		return f.row, f.err
	case <-ctx.Done():
		return dbsqlc.ReplicaMarkRow{}, context.Cause(ctx)
	}
}

// run runs f, then each flight that reads joined meanwhile, until none.
// A flight is no request's own: it is bounded by the pool's timeouts, not
// by the context of the read that began it.
func (m *marker) run(f *flight) {
	for f != nil {
		f.row, f.err = Q.ReplicaMark(context.Background(), m.primary.Conn())
		if f.err != nil {
			f.err = fmt.Errorf("read primary position: %w", f.err)
		}
		close(f.done)
		m.mu.Lock()
		f, m.next = m.next, nil
		if f == nil {
			m.running = false
		}
		m.mu.Unlock()
	}
}
