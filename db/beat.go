// Whether the server a connection reaches may still serve it: a primary
// cut off from its synchronous standbys.

package db

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"
)

// DefaultPrimaryLease is how long a beat confirmed on a server lets the
// pool's connections to it serve (Config.PrimaryLease).
const DefaultPrimaryLease = time.Second

// errCannotCommit refuses, at dial time, a host whose last beat failed:
// a connection attempt goes on to the next host of the URL.
var errCannotCommit = errors.New("the server could not confirm a commit")

// beats keeps the service off a primary that can no longer confirm its
// commits. With synchronous replication, a primary cut off from its
// standbys (a partition, or its standbys gone) still answers reads, while
// a standby promoted in its place may already acknowledge writes it will
// never see: reads there would miss acknowledged writes (make test-ha,
// partition: one or two a run), and its writes only wait for their
// deadline. So on a server with synchronous replication the service
// commits a beat (partner_primary_beat, db/functions), whose commit
// waits for a standby:
//
//   - on a new connection, unless its server confirmed one within the
//     lease: a server that cannot confirm it refuses the connection, and
//     for a lease new connections skip that host and go on to the next of
//     a multi-host URL, which may be the new primary;
//   - on a connection taken from the pool when the server's last
//     confirmed beat is older than the lease: one beat at a time per
//     server (the others taking a connection to it wait for its outcome),
//     so one request in a lease's time pays one commit; a server that
//     cannot confirm it loses the connection and the requests get
//     ErrUnavailable (503).
//
// A beat may take a statement's time (the commit of a write may too). A
// server without synchronous replication (one server alone, every test
// and benchmark but the HA ones) answers that it wrote nothing, and is
// beaten no more, except once by each new connection.
type beats struct {
	lease   time.Duration // <= 0: no beats
	timeout time.Duration // of one beat: the statement timeout
	mu      sync.Mutex
	servers map[string]*server // by the address dialled
	// skip holds, by address, until when (UnixNano) new connections
	// skip a host whose beat failed.
	skip   sync.Map
	flight singleflight.Group
}

// server is one PostgreSQL server the pool reaches.
type server struct {
	addr      string
	guarded   atomic.Bool  // it has synchronous replication
	confirmed atomic.Int64 // UnixNano of its last confirmed beat
}

// serverKey is where a connection keeps its *server (pgconn's CustomData).
const serverKey = "partnerapi.server"

func newBeats(lease, timeout time.Duration) *beats {
	return &beats{lease: lease, timeout: timeout, servers: map[string]*server{}}
}

// connectingKey marks the context of a request's acquire: a connection it
// opens skips the hosts whose beat failed. Cancel requests, which pgconn
// dials through the same DialFunc with a context of their own, and the
// direct connections (LISTEN, migrations) do not skip.
type connectingKey struct{}

// connecting marks ctx as an acquire's ([connectingKey]).
func connecting(ctx context.Context) context.Context {
	return context.WithValue(ctx, connectingKey{}, true)
}

// install sets the hooks of b on a pool's configuration.
func (b *beats) install(cfg *pgxpool.Config) {
	if b.lease <= 0 {
		return
	}
	b.skipFailed(cfg.ConnConfig)
	cfg.PrepareConn = b.prepare
}

// skipFailed makes cc's dialler refuse, for a lease, a host whose beat
// failed, when an acquire dials ([connecting]), so that pgx tries the next
// host of the URL.
func (b *beats) skipFailed(cc *pgx.ConnConfig) {
	dial := cc.DialFunc
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ctx.Value(connectingKey{}) != nil {
			if until, ok := b.skip.Load(addr); ok && time.Now().UnixNano() < until.(int64) {
				return nil, fmt.Errorf("dial %s: %w", addr, errCannotCommit)
			}
		}
		return dial(ctx, network, addr)
	}
}

// connected beats on a new connection (AfterConnect): an error refuses it.
func (b *beats) connected(ctx context.Context, conn *pgx.Conn) error {
	if b.lease <= 0 {
		return nil
	}
	addr := conn.PgConn().Conn().RemoteAddr().String()
	b.mu.Lock()
	s := b.servers[addr]
	if s == nil {
		s = &server{addr: addr}
		b.servers[addr] = s
	}
	b.mu.Unlock()
	conn.PgConn().CustomData()[serverKey] = s
	if s.guarded.Load() && s.fresh(b.lease) {
		return nil
	}
	return b.beat(ctx, conn, s)
}

// fresh reports whether s confirmed a beat within lease.
func (s *server) fresh(lease time.Duration) bool {
	return time.Since(time.Unix(0, s.confirmed.Load())) < lease
}

// prepare beats on a connection taken from the pool (PrepareConn) when its
// server's last confirmed beat is older than the lease.
func (b *beats) prepare(ctx context.Context, conn *pgx.Conn) (bool, error) {
	s, _ := conn.PgConn().CustomData()[serverKey].(*server)
	if s == nil || !s.guarded.Load() || s.fresh(b.lease) {
		return true, nil
	}
	// One beat per server at a time, on the connection of the first to
	// ask; the beat's outcome is the others' too. It runs to its own
	// timeout even if that request goes away: its outcome is the
	// server's, not the request's.
	_, err, _ := b.flight.Do(s.addr, func() (any, error) {
		if s.fresh(b.lease) {
			return nil, nil
		}
		return nil, b.beat(context.WithoutCancel(ctx), conn, s)
	})
	if err != nil {
		return false, err // the connection is destroyed, the request fails
	}
	return true, nil
}

// beat commits a beat on conn within a statement's time. Its commit is
// never cancelled (a cancelled wait for the standby reports success): at
// the deadline the connection is dropped.
func (b *beats) beat(ctx context.Context, conn *pgx.Conn, s *server) error {
	bctx, cancel := context.WithTimeout(neverCancel(ctx), b.timeout)
	defer cancel()
	wrote, err := Q.PrimaryBeat(bctx, conn)
	if err == nil && notReplicated(conn) {
		err = errNotReplicated
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42883":
		// Not migrated yet (undefined_function): nothing to guard yet,
		// but ask again on the next use.
		s.guarded.Store(true)
		return nil
	case err != nil:
		if ctx.Err() == nil {
			// The server's failure, not the caller's going away.
			b.skip.Store(s.addr, time.Now().Add(b.lease).UnixNano())
		}
		// Not %w: the beat's own deadline is not the request's (a 504).
		return fmt.Errorf("confirm a commit on %s: %w (%v)", s.addr, ErrUnavailable, err)
	}
	s.guarded.Store(wrote)
	if wrote {
		s.confirmed.Store(time.Now().UnixNano())
		b.skip.Delete(s.addr)
	}
	return nil
}
