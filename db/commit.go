// What the service does at a COMMIT's deadline, and when PostgreSQL says
// that a commit was not confirmed by a synchronous standby.

package db

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// errNotReplicated marks a statement whose commit PostgreSQL reported
// together with the warning "canceling wait for synchronous replication":
// it is committed on this server only, and a failover can discard it.
var errNotReplicated = errors.New("commit not confirmed by a synchronous standby")

// neverCancelKey marks the context of a COMMIT.
type neverCancelKey struct{}

// neverCancel marks ctx as a COMMIT's: at its deadline the connection is
// dropped instead of a cancel request sent. PostgreSQL answers a cancel
// that reaches a COMMIT waiting for its synchronous standby with a warning
// and success (the transaction is already committed locally), so a
// cancelled COMMIT can report a write that the standby never got; a
// dropped connection reports nothing, and the caller answers 503, whose
// keyed retry resolves the outcome.
func neverCancel(ctx context.Context) context.Context {
	return context.WithValue(ctx, neverCancelKey{}, true)
}

// watcher is the service's context watcher of a connection: a cancelled
// statement is stopped on the server by a cancel request (the connection
// is dropped after cancelGrace if the server does not answer), except a
// COMMIT ([neverCancel]), whose connection is dropped at once.
type watcher struct {
	cancel  *pgconn.CancelRequestContextWatcherHandler
	drop    *pgconn.DeadlineContextWatcherHandler
	dropped bool // set by HandleCancel, read by HandleUnwatchAfterCancel, which ctxwatch orders after it
}

func newWatcher(pc *pgconn.PgConn) ctxwatch.Handler {
	return &watcher{
		cancel: &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: cancelGrace},
		drop:   &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()},
	}
}

func (w *watcher) HandleCancel(ctx context.Context) {
	w.dropped = ctx.Value(neverCancelKey{}) != nil
	if w.dropped {
		w.drop.HandleCancel(ctx)
		return
	}
	w.cancel.HandleCancel(ctx)
}

func (w *watcher) HandleUnwatchAfterCancel() {
	if w.dropped {
		w.drop.HandleUnwatchAfterCancel()
		return
	}
	w.cancel.HandleUnwatchAfterCancel()
}

// cancelGrace is how long a cancelled statement may take to stop before
// its connection is given up.
const cancelGrace = 500 * time.Millisecond

// notReplicatedKey is where a connection remembers the warning until the
// statement's outcome is interpreted.
const notReplicatedKey = "partnerapi.not_replicated"

// onNotice remembers PostgreSQL's warning that it stopped waiting for the
// synchronous standby of a commit (a cancel or a termination reached the
// wait). The routine name is not translated, unlike the message.
func onNotice(pc *pgconn.PgConn, n *pgconn.Notice) {
	if n.Routine == "SyncRepWaitForLSN" || strings.Contains(n.Message, "synchronous replication") {
		pc.CustomData()[notReplicatedKey] = true
	}
}

// notReplicated reports, and forgets, that conn's last statement got the
// warning of [onNotice]; the connection is then closed, so that nothing
// else runs on a session whose last commit is in doubt.
func notReplicated(conn *pgx.Conn) bool {
	if conn == nil {
		return false
	}
	data := conn.PgConn().CustomData()
	if data[notReplicatedKey] == nil {
		return false
	}
	delete(data, notReplicatedKey)
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	_ = conn.Close(ctx)
	return true
}
