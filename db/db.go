// Package db owns the PostgreSQL side of the service: the connection pool,
// the embedded migrations, the one transaction helper and the one place
// where pgx errors become domain errors. Handlers use the stateless sqlc
// queries in [dbsqlc] through a [DBTX] that this package hands out, so they
// never see a pgx error type.
package db

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db/dbsqlc"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations is the schema, as goose migrations. sqlc reads the same files.
var Migrations, _ = fs.Sub(migrationFS, "migrations")

// Q holds the generated queries. They are stateless: each method takes the
// connection (a pool or a transaction) as its first argument.
var Q = dbsqlc.New()

// DBTX is what the generated queries run on.
type DBTX = dbsqlc.DBTX

// Defaults of [Config]. Both are well under the five seconds within which
// a request that needs an unavailable database must be answered 503.
const (
	DefaultAcquireTimeout   = time.Second
	DefaultStatementTimeout = 2 * time.Second
)

// Config says how to reach PostgreSQL and how long to wait for it.
type Config struct {
	// URL is where statements go: PostgreSQL itself, or a pooler such as
	// PgBouncer in transaction mode in front of it.
	URL string
	// DirectURL reaches PostgreSQL with a session of its own, for what a
	// transaction pooler cannot carry: LISTEN and the migration lock.
	// Default URL.
	DirectURL string
	// MaxConns bounds the pool. Default: pool_max_conns in URL, else
	// max(8, 4 × GOMAXPROCS).
	MaxConns int32
	// AcquireTimeout bounds the wait for a pooled connection, opening one
	// included. Default [DefaultAcquireTimeout].
	AcquireTimeout time.Duration
	// StatementTimeout bounds each statement (a COMMIT too); the statement
	// is then cancelled on the server, except a COMMIT, whose connection is
	// dropped instead ([neverCancel]). Default [DefaultStatementTimeout].
	StatementTimeout time.Duration
	// TenantShare bounds the pooled connections that one workspace's
	// requests hold at once, and ClientShare those of one API client
	// (requests marked with [WithTenant]). A request beyond its share
	// waits up to AcquireTimeout, holding no connection, then fails with
	// [ErrBusy]. Defaults: half the pool, at least 1; ClientShare defaults
	// to TenantShare. Negative: no bound.
	TenantShare, ClientShare int
	// ReadURL, when set, reaches hot standbys (one or several hosts, with
	// target_session_attrs=standby or prefer-standby): the reads of
	// [DB.Reader] go there once the standby shows every write
	// acknowledged before the read arrived. Unset: they use the pool.
	ReadURL string
	// PrimaryLease is how long a beat confirmed on a server with
	// synchronous replication lets the pool's connections to it serve
	// (see beats). Default [DefaultPrimaryLease]; negative: no beats.
	PrimaryLease time.Duration
	// Release is the release number of the running binary
	// (MAJOR.MINOR.PATCH); [Migrate] records it beside the function files
	// it applies and leaves alone those a newer release applied. Empty
	// (tests, benchmarks): every function file that differs is applied.
	Release string
	// ReadWait bounds the wait of a read for a standby to replay the
	// primary's position before it goes to the primary. Default
	// [DefaultReadWait]; negative: no wait.
	ReadWait time.Duration
}

// DB is a pool whose statements are bounded in time and whose errors are
// already interpreted. The pool itself is not exported, so nothing can
// bypass either.
type DB struct {
	pool   *pgxpool.Pool
	direct *pgx.ConnConfig
	// acquire and statement are the timeouts of Config.
	acquire, statement time.Duration
	conn, planned      DBTX
	// shares bounds each tenant's connections; nil: unbounded.
	shares *shares
	// plannedMode is the exec mode argument of Planned and PlannedTx.
	plannedMode []any
	// reads is the pool on standbys; nil: reads use this pool.
	reads *reads
	// release is Config.Release.
	release string
}

// Open connects a pool to url with the default timeouts.
func Open(ctx context.Context, url string) (*DB, error) {
	return OpenConfig(ctx, Config{URL: url})
}

// OpenConfig connects a pool as cfg says.
//
// How statements are sent (pgx's query exec mode) depends on what is in
// front of PostgreSQL, unless the URL names a mode
// (default_query_exec_mode):
//
//   - with a transaction pooler (DirectURL set and not URL: PgBouncer in
//     transaction mode hands each transaction any server connection),
//     every statement uses the unnamed statement with a description
//     cached in pgx (cache_describe): nothing is prepared on a server
//     connection, each statement is one round trip, parameters and results
//     travel in binary, and each is planned with its actual parameters;
//   - straight to PostgreSQL (DirectURL empty or equal to URL), single
//     statements are prepared once per connection and cached
//     (cache_statement), which saves their parsing and planning; the
//     statements that must be planned per execution ([DB.Planned],
//     [PlannedTx]) still use the unnamed statement.
//
// Context cancellation sends PostgreSQL a cancel request, so a statement
// that times out stops on the server too and its transaction rolls back;
// a COMMIT is never cancelled (its connection is dropped), and a commit
// that PostgreSQL reports as not confirmed by its synchronous standby is
// [ErrUnavailable] (see commit.go).
func OpenConfig(ctx context.Context, c Config) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	switch {
	case c.MaxConns > 0:
		cfg.MaxConns = c.MaxConns
	case !strings.Contains(c.URL, "pool_max_conns"):
		cfg.MaxConns = int32(max(8, 4*runtime.GOMAXPROCS(0)))
	}
	cfg.ConnConfig.Tracer = tracer{}
	pooler := c.DirectURL != "" && c.DirectURL != c.URL
	c = c.withDefaults()
	configure(cfg.ConnConfig, c.URL, c)
	if !strings.Contains(c.URL, "default_query_exec_mode") && !pooler {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	}
	beats := newBeats(c.PrimaryLease, c.StatementTimeout)
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		registerTypes(conn.TypeMap())
		if err := beats.connected(ctx, conn); err != nil {
			return err
		}
		// The first connection to a new primary records where its
		// timeline began while that is still known (migration 00110):
		// the cursors read before the failover that it kept stay valid.
		// Best effort: an error fails nothing but a lost connection.
		if _, err := Q.HistoryNote(ctx, conn); err != nil && conn.IsClosed() {
			return fmt.Errorf("note history: %w", err)
		}
		return nil
	}
	direct, err := pgx.ParseConfig(c.DirectURL)
	if err != nil {
		return nil, fmt.Errorf("parse direct database url: %w", err)
	}
	configure(direct, c.DirectURL, c)
	beats.install(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	d := newDB(pool, direct, c)
	if c.ReadURL != "" {
		if d.reads, err = openReads(ctx, d, c); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return d, nil
}

// plannedMode is the exec mode of statements planned per execution: the
// unnamed statement, as the pool's mode already uses unless it prepares
// and caches statements.
func plannedMode(m pgx.QueryExecMode) pgx.QueryExecMode {
	if m == pgx.QueryExecModeCacheStatement {
		return pgx.QueryExecModeCacheDescribe
	}
	return m
}

func (c Config) withDefaults() Config {
	if c.DirectURL == "" {
		c.DirectURL = c.URL
	}
	if c.AcquireTimeout <= 0 {
		c.AcquireTimeout = DefaultAcquireTimeout
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = DefaultStatementTimeout
	}
	if c.PrimaryLease == 0 {
		c.PrimaryLease = DefaultPrimaryLease
	}
	return c
}

// configure sets what every connection of the service shares: the exec
// mode, a connect timeout per host, what a cancelled context does
// ([watcher]), the warning of a commit in doubt ([onNotice]), and the
// errors after which a connection is not reused.
func configure(cc *pgx.ConnConfig, url string, c Config) {
	if !strings.Contains(url, "default_query_exec_mode") {
		cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = hostConnectTimeout(cc, c)
	}
	cc.BuildContextWatcherHandler = newWatcher
	cc.OnNotice = onNotice
	next := cc.OnPgError
	cc.OnPgError = func(pc *pgconn.PgConn, e *pgconn.PgError) bool {
		if wrongServer(e.Code) {
			return false // discard: the next connection may reach the primary
		}
		return next == nil || next(pc, e)
	}
}

// hostConnectTimeout bounds one host's connection attempt (pgx applies
// ConnectTimeout to each host of a multi-host URL in turn): a frozen host
// early in the list, which accepts TCP but never answers, must leave the
// others time within the acquire timeout. With several hosts each gets an
// equal part of it, at least minHostConnect; one host gets a statement's
// time.
func hostConnectTimeout(cc *pgx.ConnConfig, c Config) time.Duration {
	hosts := map[string]bool{cc.Host + ":" + fmt.Sprint(cc.Port): true}
	for _, f := range cc.Fallbacks {
		hosts[f.Host+":"+fmt.Sprint(f.Port)] = true
	}
	if len(hosts) == 1 {
		return c.StatementTimeout
	}
	per := c.AcquireTimeout / time.Duration(len(hosts))
	return min(max(per, minHostConnect), c.StatementTimeout)
}

// minHostConnect is the shortest connect timeout given to a host: a TLS
// handshake and authentication across a data centre fit well within it.
const minHostConnect = 250 * time.Millisecond

// registerTypes teaches pgx github.com/google/uuid: to encode and scan it
// as 16 bytes (uuidCodec), and, in the exec and simple protocol modes
// where parameters are sent untyped, that it is a uuid.
func registerTypes(m *pgtype.Map) {
	registerCodecs(m)
	m.RegisterDefaultPgType(uuid.UUID{}, "uuid")
	m.RegisterDefaultPgType([]uuid.UUID{}, "_uuid")
}

// New wraps an existing pool (tests that trace queries build their own)
// with the default timeouts. LISTEN and migrations use the pool's own
// connection settings.
func New(pool *pgxpool.Pool) *DB {
	c := Config{}.withDefaults()
	return newDB(pool, pool.Config().ConnConfig.Copy(), c)
}

func newDB(pool *pgxpool.Pool, direct *pgx.ConnConfig, c Config) *DB {
	d := &DB{pool: pool, direct: direct, acquire: c.AcquireTimeout, statement: c.StatementTimeout, release: c.Release}
	if c.TenantShare >= 0 {
		perWorkspace := c.TenantShare
		if perWorkspace == 0 {
			perWorkspace = max(1, int(pool.Config().MaxConns)/2)
		}
		perClient := c.ClientShare
		if perClient <= 0 {
			perClient = perWorkspace
		}
		d.shares = newShares(perWorkspace, perClient)
	}
	d.conn = pooled{d: d}
	d.plannedMode = []any{plannedMode(pool.Config().ConnConfig.DefaultQueryExecMode)}
	d.planned = pooled{d: d, mode: d.plannedMode}
	return d
}

// Close closes the pool. It waits for connections in use to come back, so
// the server cancels its requests' work before.
func (d *DB) Close() {
	if d.reads != nil {
		d.reads.standby.Close()
	}
	d.pool.Close()
}

// Ping checks that the database answers, within the timeouts. /readyz uses
// it.
func (d *DB) Ping(ctx context.Context) error {
	c, release, err := d.acquireConn(ctx)
	if err != nil {
		return err
	}
	defer release()
	sctx, cancel := d.statementContext(ctx)
	defer cancel()
	return d.interpret(sctx, c.Conn(), c.Ping(sctx))
}

// Stat reports the pool's connections, for metrics.
func (d *DB) Stat() *pgxpool.Stat { return d.pool.Stat() }

// StatementTimeout is the bound of each statement.
func (d *DB) StatementTimeout() time.Duration { return d.statement }

// MaxConns is the pool's size.
func (d *DB) MaxConns() int32 { return d.pool.Config().MaxConns }

// Conn runs single statements outside a transaction.
func (d *DB) Conn() DBTX { return d.conn }

// Planned runs single statements that must be planned with their actual
// parameters on every execution: the list queries, whose optional filters
// ("@x IS NULL OR col = @x") only fold away, and let PostgreSQL pick the
// right index, in a plan made for the values at hand. A cached generic
// plan would scan the sort index for a one-row email filter. It uses the
// unnamed statement even when other statements are prepared and cached.
func (d *DB) Planned() DBTX { return d.planned }

// PlannedTx is Planned for the statements of a transaction: the
// set-based statements of a batch join their items to the tables, and a
// cached generic plan of them ran several times slower than one made for
// the items at hand.
func PlannedTx(tx DBTX) DBTX {
	if b, ok := tx.(bounded); ok {
		b.mode = b.d.plannedMode
		return b
	}
	return tx
}
