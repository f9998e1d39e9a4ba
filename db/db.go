// Package db owns the PostgreSQL side of the service: the connection pool,
// the embedded migrations, the one transaction helper and the one place
// where pgx errors become domain errors. Handlers use the stateless sqlc
// queries in [dbsqlc] through a [DBTX] that this package hands out, so they
// never see a pgx error type.
package db

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
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
	// is then cancelled on the server. Default [DefaultStatementTimeout].
	StatementTimeout time.Duration
	// TenantShare bounds the pooled connections that one workspace's
	// requests hold at once, and ClientShare those of one API client
	// (requests marked with [WithTenant]). A request beyond its share
	// waits up to AcquireTimeout, holding no connection, then fails with
	// [ErrBusy]. Defaults: half the pool, at least 1; ClientShare defaults
	// to TenantShare. Negative: no bound.
	TenantShare, ClientShare int
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
// that times out stops on the server too and its transaction rolls back.
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
	configure(cfg.ConnConfig, c.URL, c.StatementTimeout)
	if !strings.Contains(c.URL, "default_query_exec_mode") && !pooler {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	}
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		registerTypes(conn.TypeMap())
		return nil
	}
	direct, err := pgx.ParseConfig(c.DirectURL)
	if err != nil {
		return nil, fmt.Errorf("parse direct database url: %w", err)
	}
	configure(direct, c.DirectURL, c.StatementTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return newDB(pool, direct, c), nil
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
	return c
}

// configure sets what every connection of the service shares: the exec
// mode, a connect timeout, and cancel requests on context cancellation.
func configure(cc *pgx.ConnConfig, url string, statementTimeout time.Duration) {
	if !strings.Contains(url, "default_query_exec_mode") {
		cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = statementTimeout
	}
	cc.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		// The cancel request stops the statement on the server; the deadline
		// after it frees this side when the server does not answer at all
		// (frozen), and the connection is then discarded.
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: cancelGrace}
	}
}

// cancelGrace is how long a cancelled statement may take to stop before
// its connection is given up.
const cancelGrace = 500 * time.Millisecond

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
	d := &DB{pool: pool, direct: direct, acquire: c.AcquireTimeout, statement: c.StatementTimeout}
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
func (d *DB) Close() { d.pool.Close() }

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

var (
	errAcquireTimeout   = fmt.Errorf("%w: no database connection within the acquire timeout", ErrUnavailable)
	errStatementTimeout = fmt.Errorf("%w: statement timeout", ErrUnavailable)
)

// WithBudget bounds all the database work done under ctx by d: when it
// runs out, statements are cancelled and fail with [ErrUnavailable]. The
// server gives each request one, so that a request which needs several
// slow statements is still answered in time.
func WithBudget(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(d)
	if outer, ok := Budget(ctx); ok && outer.Before(deadline) {
		deadline = outer // a budget within a budget ends with it
	}
	ctx, cancel := context.WithDeadlineCause(ctx, deadline, errBudgetSpent)
	return context.WithValue(ctx, budgetKey{}, deadline), cancel
}

type budgetKey struct{}

// Budget is the deadline [WithBudget] gave the database work under ctx,
// which is the server's, unlike ctx's own deadline, which a client may
// have set shorter (Connect-Timeout-Ms, grpc-timeout). Work shared by
// several requests (internal/groupcommit) is bounded by it, so that no
// client chooses how long the others' work may take.
func Budget(ctx context.Context) (time.Time, bool) {
	d, ok := ctx.Value(budgetKey{}).(time.Time)
	return d, ok
}

// errBudgetSpent is made once: WithBudget runs on every request.
var errBudgetSpent = fmt.Errorf("%w: request time budget spent", ErrUnavailable)

// acquireConn takes a connection from the pool, within the acquire
// timeout, and a slot of the request's tenant's share first ([WithTenant]):
// a tenant at its share waits without holding a connection, so other
// tenants never wait for one because of it. release gives both back.
func (d *DB) acquireConn(ctx context.Context) (c *pgxpool.Conn, release func(), err error) {
	leave, err := d.claim(ctx)
	if err != nil {
		return nil, nil, notSent{err}
	}
	actx, cancel := context.WithTimeoutCause(ctx, d.acquire, errAcquireTimeout)
	defer cancel()
	c, err = d.pool.Acquire(actx)
	if err != nil {
		if leave != nil {
			leave()
		}
		return nil, nil, notSent{d.interpret(actx, nil, fmt.Errorf("acquire connection: %w", err))}
	}
	if leave == nil {
		return c, c.Release, nil
	}
	return c, func() { c.Release(); leave() }, nil
}

func (d *DB) statementContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d.statement, errStatementTimeout)
}

// WithTx runs fn in a READ COMMITTED transaction and commits when fn returns
// nil. On an error or a panic it rolls back. The error fn returns is passed
// through unchanged; errors of the queries inside it are already mapped. A
// COMMIT whose answer is lost (the connection died) is [ErrUnavailable]:
// its outcome is unknown.
func (d *DB) WithTx(ctx context.Context, fn func(tx DBTX) error) (err error) {
	c, release, err := d.acquireConn(ctx)
	if err != nil {
		return err
	}
	defer release()
	bctx, cancel := d.statementContext(ctx)
	tx, err := c.Begin(bctx)
	if err != nil {
		cancel()
		return d.interpret(bctx, c.Conn(), fmt.Errorf("begin transaction: %w", err))
	}
	cancel()
	defer func() {
		if p := recover(); p != nil {
			d.rollback(ctx, tx)
			panic(p)
		}
		if err != nil {
			d.rollback(ctx, tx)
		}
	}()
	if err = fn(bounded{d: d, inner: tx, conn: c.Conn()}); err != nil {
		return err
	}
	cctx, cancel := d.statementContext(ctx)
	defer cancel()
	if err = tx.Commit(cctx); err != nil {
		return d.interpret(cctx, c.Conn(), fmt.Errorf("commit transaction: %w", err))
	}
	return nil
}

// rollback is bounded like a statement, and by ctx's deadline plus the
// cancel grace; when it fails, pgx closes the connection, and PostgreSQL
// rolls back when it sees the session end.
func (d *DB) rollback(ctx context.Context, tx pgx.Tx) {
	limit := time.Now().Add(d.statement)
	if dl, ok := ctx.Deadline(); ok && dl.Add(cancelGrace).Before(limit) {
		// Not past the request's own bound: a rollback that cannot be
		// sent in time closes the connection instead.
		limit = dl.Add(cancelGrace)
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), limit)
	defer cancel()
	_ = tx.Rollback(rctx)
}

// ErrNotFound means a query that expects a row found none.
var ErrNotFound = errors.New("db: not found")

// ErrKeyInFlight means another request with the same Idempotency-Key is
// still running (SQLSTATE PA409, raised by idempotency_claim).
var ErrKeyInFlight = errors.New("db: idempotency key in flight")

// ErrKeyReused means the Idempotency-Key was stored with another request
// body (SQLSTATE PA422, raised by idempotency_claim).
var ErrKeyReused = errors.New("db: idempotency key reused")

// ErrRetry means the transaction lost a deadlock or a serialization race
// (interpret wraps it with ErrUnavailable too: "not now", not the
// caller's fault)
// and was rolled back; running it again may succeed.
var ErrRetry = errors.New("db: transaction aborted by a concurrent one; retry")

// ErrUnavailable means the database could not be reached or answered with a
// server-side failure that is not the caller's fault.
var ErrUnavailable = errors.New("db: unavailable")

// ConflictError is a unique or foreign key violation, named by constraint.
type ConflictError struct {
	// Constraint is the violated constraint or index, e.g. "contacts_email".
	Constraint string
	// ForeignKey is true for a foreign key violation.
	ForeignKey bool
	err        error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("db: constraint %s violated", e.Constraint)
}

func (e *ConflictError) Unwrap() error { return e.err }

// interpret is the one place that turns pgx errors into domain errors.
//
// Whatever says the database cannot serve now, as opposed to "this
// request is wrong", is [ErrUnavailable]: a connection that could not be
// opened (refused, "the database system is starting up", "too many
// clients"), one that broke mid-request, and the SQLSTATE classes 08
// (connection exception), 53 (insufficient resources), 57 (operator
// intervention: shutdown, crash, cancel) and 58 (system error), and lock,
// deadlock and serialization failures and statements cached before a
// migration ([staleStatement]), which a retry can pass.
func interpret(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return &ConflictError{Constraint: pgErr.ConstraintName, err: err}
		case "23503":
			return &ConflictError{Constraint: pgErr.ConstraintName, ForeignKey: true, err: err}
		case "40P01", "40001":
			return fmt.Errorf("%w: %w: %w", ErrRetry, ErrUnavailable, err)
		case "PA409":
			return fmt.Errorf("%w: %w", ErrKeyInFlight, err)
		case "PA422":
			return fmt.Errorf("%w: %w", ErrKeyReused, err)
		}
		if transient(pgErr.Code) || staleStatement(pgErr) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || lostConnection(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// notSent is the error of a statement that was never sent: no connection
// could be had for it.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// NotApplied reports whether err, the error of a single statement run
// outside a transaction, proves that the statement took no effect: it was
// never sent (no connection, or the tenant's share was in use), or
// PostgreSQL answered it with an ERROR, which rolled it back. An error
// that lost the connection proves nothing: the statement may have
// committed. Work shared by several callers (a group) is run again by each
// caller on its own only when this holds, so that one caller's failure or
// budget never decides another's outcome, and nothing is written twice.
func NotApplied(err error) bool {
	var ns notSent
	if errors.As(err, &ns) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || errors.Is(err, errConnLost) {
		return false
	}
	sev := pgErr.SeverityUnlocalized
	if sev == "" {
		sev = pgErr.Severity
	}
	return sev == "ERROR"
}

// errConnLost marks an error after which the connection was closed: what
// the statement did is unknown.
var errConnLost = errors.New("connection lost")

// ItemError is the error of one item of a statement that runs several and
// reports each failed item's SQLSTATE and constraint instead of failing
// (lead_create_group): the error the item's own statement would have
// returned, mapped by [interpret] like any other.
func ItemError(code, constraint string) error {
	return interpret(&pgconn.PgError{Severity: "ERROR", Code: code, ConstraintName: constraint,
		Message: "an item of a group failed"})
}

// transient reports whether a SQLSTATE means "not now" rather than "not
// this request".
func transient(code string) bool {
	switch code[:2] {
	case "08", "53", "57", "58":
		return true
	}
	switch code {
	case "55P03", "40001", "40P01": // lock_not_available, serialization_failure, deadlock_detected
		return true
	}
	return false
}

// staleStatement reports PostgreSQL's refusal to run a statement prepared
// before a migration changed the types it returns ("cached plan must not
// change result type", named by its routine: the message may be
// translated). pgx forgets the statement on that error and prepares it
// again next time, so it is "not now", like a serialization failure.
func staleStatement(e *pgconn.PgError) bool {
	return e.Code == "0A000" && e.Routine == "RevalidateCachedQuery"
}

// lostConnection reports an I/O failure of the connection itself.
func lostConnection(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// interpret maps err of a statement that ran under ctx on conn (nil when
// none was acquired). A deadline of ours (acquire, statement, request
// budget, shutdown) is [ErrUnavailable]; a caller's own cancellation stays
// a context error; an error that left the connection closed lost it.
func (d *DB) interpret(ctx context.Context, conn *pgx.Conn, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrUnavailable) {
			// The context error is not wrapped: this is not the caller's
			// deadline, and must not be answered as one. PostgreSQL's
			// answer to the cancel request is ([NotApplied]) when the
			// connection survived it.
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && conn != nil && !conn.IsClosed() {
				return fmt.Errorf("%w: %w", cause, pgErr)
			}
			return fmt.Errorf("%w: %v", cause, err)
		} else if !errors.Is(err, ctx.Err()) && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return interpret(err)
	}
	if conn != nil && conn.IsClosed() && !errors.Is(err, pgx.ErrNoRows) {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, "23") {
			return fmt.Errorf("%w: %w: %w", ErrUnavailable, errConnLost, err)
		}
	}
	return interpret(err)
}

// pooled runs each statement on a connection acquired for it, within the
// acquire and statement timeouts.
type pooled struct {
	d *DB
	// mode, when set, is a pgx.QueryExecMode passed ahead of the arguments.
	mode []any
}

func (p pooled) on(ctx context.Context) (bounded, error) {
	c, release, err := p.d.acquireConn(ctx)
	if err != nil {
		return bounded{}, err
	}
	return bounded{d: p.d, inner: c, conn: c.Conn(), release: release, mode: p.mode}, nil
}

func (p pooled) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b, err := p.on(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer b.release()
	return b.Exec(ctx, sql, args...)
}

func (p pooled) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b, err := p.on(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := b.Query(ctx, sql, args...)
	if err != nil {
		b.release()
		return nil, err
	}
	return rows, nil
}

func (p pooled) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := p.Query(ctx, sql, args...)
	if err != nil {
		return failedRow{err}
	}
	return oneRow{rows}
}

// bounded runs statements on one connection or transaction, each within
// the statement timeout, with errors interpreted. release, when set, gives
// the connection back once a statement (its rows read) is done.
type bounded struct {
	d       *DB
	inner   DBTX
	conn    *pgx.Conn
	release func()
	mode    []any
}

func (b bounded) args(args []any) []any {
	if b.mode == nil {
		return args
	}
	return append(append([]any{}, b.mode...), args...)
}

func (b bounded) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	sctx, cancel := b.d.statementContext(ctx)
	defer cancel()
	tag, err := b.inner.Exec(sctx, sql, b.args(args)...)
	return tag, b.d.interpret(sctx, b.conn, err)
}

func (b bounded) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	sctx, cancel := b.d.statementContext(ctx)
	rows, err := b.inner.Query(sctx, sql, b.args(args)...)
	if err != nil {
		err = b.d.interpret(sctx, b.conn, err)
		cancel()
		return nil, err
	}
	return &boundedRows{Rows: rows, b: b, ctx: sctx, cancel: cancel}, nil
}

func (b bounded) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := b.Query(ctx, sql, args...)
	if err != nil {
		return failedRow{err}
	}
	return oneRow{rows}
}

// boundedRows ends the statement's timeout, and gives a pooled connection
// back, when the rows are closed.
type boundedRows struct {
	pgx.Rows
	b      bounded
	ctx    context.Context
	cancel context.CancelFunc
	done   bool
	err    error
}

func (r *boundedRows) Close() {
	if r.done {
		return
	}
	r.done = true
	r.Rows.Close()
	// Interpret before cancel: afterwards every error would look like a
	// cancellation.
	r.err = r.b.d.interpret(r.ctx, r.b.conn, r.Rows.Err())
	r.cancel()
	if r.b.release != nil {
		r.b.release()
	}
}

func (r *boundedRows) Err() error {
	if r.done {
		return r.err
	}
	return r.b.d.interpret(r.ctx, r.b.conn, r.Rows.Err())
}

func (r *boundedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// oneRow is pgx.Row over rows: the first row, or ErrNotFound.
type oneRow struct{ rows pgx.Rows }

func (r oneRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return ErrNotFound
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }
