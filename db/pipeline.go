package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Session is one pooled connection held for a short sequence of
// pipelines, so a transaction can span them. When the session ends in the
// middle of a transaction (an error, a replay), it is rolled back.
type Session struct {
	conn *pgxpool.Conn
	d    *DB
}

// WithSession runs fn on one connection of the pool.
func (d *DB) WithSession(ctx context.Context, fn func(s *Session) error) error {
	c, err := d.acquireConn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if c.Conn().PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.statement)
			if _, err := c.Exec(rctx, "ROLLBACK"); err != nil {
				// A connection in an unknown state must not go back to the pool.
				_ = c.Conn().Close(rctx)
			}
			cancel()
		}
		c.Release()
	}()
	return fn(&Session{conn: c, d: d})
}

// Pipeline starts an empty pipeline on the session.
func (s *Session) Pipeline() *Pipeline { return &Pipeline{conn: s.conn, d: s.d} }

// Pipeline sends several statements to PostgreSQL in one round trip while
// the statements themselves stay the generated sqlc queries: each query
// runs in its own goroutine against a DBTX that queues its statement, and
// Flush sends the queue and hands each query its result, in order. A
// statement that fails makes PostgreSQL skip the rest of the pipeline;
// in a transaction, the transaction is then aborted.
type Pipeline struct {
	d     *DB
	conn  *pgxpool.Conn
	calls []*call
}

const (
	kindNone = iota
	kindExec
	kindQueryRow
	kindQuery
)

type call struct {
	kind       int
	sql        string
	args       []any
	queued     chan struct{} // the statement is known (or fn returned without one)
	res        chan result
	consumed   chan struct{} // a row was scanned, or rows were closed
	finished   chan struct{} // fn returned
	queuedOnce bool
}

type result struct {
	tag  pgconn.CommandTag
	row  pgx.Row
	rows pgx.Rows
	err  error
}

// Go adds fn, which must run exactly one statement on tx, to the pipeline.
// fn runs concurrently; read what it stored only after Flush.
func (p *Pipeline) Go(fn func(tx DBTX)) {
	c := &call{queued: make(chan struct{}), res: make(chan result, 1), consumed: make(chan struct{}), finished: make(chan struct{})}
	p.calls = append(p.calls, c)
	go func() {
		defer close(c.finished)
		fn(mapped{pipeTx{c}})
		c.queue(kindNone, "", nil)
	}()
	<-c.queued
}

// Exec adds a statement whose result only matters for its error, such as
// BEGIN or COMMIT.
func (p *Pipeline) Exec(sql string) {
	p.Go(func(tx DBTX) { _, _ = tx.Exec(context.Background(), sql) })
}

// Flush sends the queued statements in one round trip, delivers their
// results, waits for every query to finish, and returns the first
// statement error (not a missing row).
func (p *Pipeline) Flush(ctx context.Context) error {
	calls := p.calls
	p.calls = nil
	b := &pgx.Batch{}
	for _, c := range calls {
		if c.kind != kindNone {
			b.Queue(c.sql, c.args...)
		}
	}
	ctx, cancel := p.d.statementContext(ctx)
	defer cancel()
	br := p.conn.SendBatch(ctx, b)
	var first error
	note := func(err error) {
		if err != nil && first == nil && !errors.Is(err, pgx.ErrNoRows) {
			first = err
		}
	}
	for _, c := range calls {
		switch c.kind {
		case kindExec:
			tag, err := br.Exec()
			note(err)
			c.res <- result{tag: tag, err: err}
		case kindQueryRow:
			row := &pipeRow{inner: br.QueryRow(), consumed: c.consumed}
			c.res <- result{row: row}
			<-c.consumed
			note(row.err)
		case kindQuery:
			rows, err := br.Query()
			note(err)
			if err != nil {
				c.res <- result{err: err}
				break
			}
			c.res <- result{rows: &pipeRows{Rows: rows, consumed: c.consumed}}
			<-c.consumed
			note(rows.Err())
		}
	}
	note(br.Close())
	for _, c := range calls {
		<-c.finished
	}
	return p.d.interpret(ctx, p.conn.Conn(), first)
}

func (c *call) queue(kind int, sql string, args []any) {
	if c.queuedOnce {
		return
	}
	c.queuedOnce = true
	c.kind, c.sql, c.args = kind, sql, args
	close(c.queued)
}

// pipeTx is the DBTX a pipelined query runs on.
type pipeTx struct{ c *call }

var errTwoStatements = errors.New("db: a pipelined query may run one statement")

func (t pipeTx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.c.queuedOnce {
		return pgconn.CommandTag{}, errTwoStatements
	}
	t.c.queue(kindExec, sql, args)
	r := <-t.c.res
	return r.tag, r.err
}

func (t pipeTx) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	if t.c.queuedOnce {
		return errRow{errTwoStatements}
	}
	t.c.queue(kindQueryRow, sql, args)
	return (<-t.c.res).row
}

func (t pipeTx) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.c.queuedOnce {
		return nil, errTwoStatements
	}
	t.c.queue(kindQuery, sql, args)
	r := <-t.c.res
	if r.err != nil {
		return nil, r.err
	}
	return r.rows, nil
}

type pipeRow struct {
	inner    pgx.Row
	consumed chan struct{}
	err      error
	once     bool
}

func (r *pipeRow) Scan(dest ...any) error {
	if r.once {
		return errors.New("db: row scanned twice")
	}
	r.once = true
	r.err = r.inner.Scan(dest...)
	close(r.consumed)
	return r.err
}

type pipeRows struct {
	pgx.Rows
	consumed chan struct{}
	closed   bool
}

func (r *pipeRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		close(r.consumed)
	}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
