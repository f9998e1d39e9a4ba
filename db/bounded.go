// Statements on a pooled connection or a transaction, each bounded by the
// statement timeout, with their errors interpreted.

package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

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
