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
	"io/fs"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// DB is a pool whose errors are already interpreted.
type DB struct {
	// Pool is the raw pool, for health checks and LISTEN.
	Pool    *pgxpool.Pool
	conn    DBTX
	planned DBTX
}

// Open connects a pool to url. Statements are prepared once per
// connection and their plans cached (pgx's default), which keeps the hot
// single-row statements cheap for PostgreSQL; the list queries go through
// [DB.Planned] instead.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(max(8, 4*runtime.GOMAXPROCS(0)))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return New(pool), nil
}

// New wraps an existing pool.
func New(pool *pgxpool.Pool) *DB {
	return &DB{Pool: pool, conn: mapped{pool}, planned: mapped{planned{pool}}}
}

// Close closes the pool.
func (d *DB) Close() { d.Pool.Close() }

// Conn runs single statements outside a transaction.
func (d *DB) Conn() DBTX { return d.conn }

// Planned runs single statements that must be planned with their actual
// parameters on every execution: the list queries, whose optional filters
// ("@x IS NULL OR col = @x") only fold away, and let PostgreSQL pick the
// right index, in a plan made for the values at hand. A cached generic
// plan would scan the sort index for a one-row email filter.
func (d *DB) Planned() DBTX { return d.planned }

// PlannedTx is Planned for the statements of a transaction: the set-based
// statements of a batch join their jsonb items to the tables, and a cached
// generic plan of them ran several times slower than one made for the
// items at hand.
func PlannedTx(tx DBTX) DBTX { return planned{tx} }

// planned runs queries with the unnamed statement
// (QueryExecModeCacheDescribe): described once, planned every time.
type planned struct{ inner DBTX }

func (p planned) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.inner.Exec(ctx, sql, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
}

func (p planned) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.inner.Query(ctx, sql, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
}

func (p planned) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.inner.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
}

// WithTx runs fn in a READ COMMITTED transaction and commits when fn returns
// nil. On an error or a panic it rolls back. The error fn returns is passed
// through unchanged; errors of the queries inside it are already mapped.
func (d *DB) WithTx(ctx context.Context, fn func(tx DBTX) error) (err error) {
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		return interpret(fmt.Errorf("begin transaction: %w", err))
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = fn(mapped{tx}); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return interpret(fmt.Errorf("commit transaction: %w", err))
	}
	return nil
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
func interpret(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return &ConflictError{Constraint: pgErr.ConstraintName, err: err}
		case "23503":
			return &ConflictError{Constraint: pgErr.ConstraintName, ForeignKey: true, err: err}
		case "40P01", "40001":
			return fmt.Errorf("%w: %w", ErrRetry, err)
		case "PA409":
			return fmt.Errorf("%w: %w", ErrKeyInFlight, err)
		case "PA422":
			return fmt.Errorf("%w: %w", ErrKeyReused, err)
		}
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// mapped wraps a pool or transaction so every error the generated queries
// see has gone through interpret.
type mapped struct{ inner DBTX }

func (m mapped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := m.inner.Exec(ctx, sql, args...)
	return tag, interpret(err)
}

func (m mapped) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := m.inner.Query(ctx, sql, args...)
	if err != nil {
		return nil, interpret(err)
	}
	return mappedRows{rows}, nil
}

func (m mapped) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return mappedRow{m.inner.QueryRow(ctx, sql, args...)}
}

type mappedRow struct{ inner pgx.Row }

func (r mappedRow) Scan(dest ...any) error { return interpret(r.inner.Scan(dest...)) }

type mappedRows struct{ pgx.Rows }

func (r mappedRows) Err() error { return interpret(r.Rows.Err()) }
