// WithTx, the request budget and connection acquisition: how long the
// database work of a request may take, and the one transaction helper.

package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

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
// several requests (internal/work/groupcommit) is bounded by it, so that no
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
	actx, cancel := context.WithTimeoutCause(connecting(ctx), d.acquire, errAcquireTimeout)
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
	cctx, cancel := d.statementContext(neverCancel(ctx))
	defer cancel()
	if err = tx.Commit(cctx); err != nil || notReplicated(c.Conn()) {
		if err == nil {
			err = errNotReplicated
		}
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
