// The one mapping of pgx errors to domain errors.

package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

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
// intervention: shutdown, crash, cancel), 58 (system error) and 25
// (invalid transaction state: a write sent to a read-only standby, which a
// failover or a stale DSN can route it to), and lock,
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
		// Not %w: a host's own connect timeout inside it is not the
		// caller's deadline (that would be a 504); the caller's own is
		// read from its context before this ([DB.interpret]).
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
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
		if pgErr.Code == "58P01" {
			return fmt.Errorf("%w: %w: %w", ErrUnavailable, errServerFiles, err)
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

// errServerFiles names SQLSTATE 58P01 (undefined_file) for what it nearly
// always is in operation: PostgreSQL's package was upgraded in place under
// a running server, whose backends now fail to load a library of the new
// version ("could not load library"). Every request is a 503 until
// PostgreSQL is restarted; the log says so.
var errServerFiles = errors.New("PostgreSQL cannot load one of its own files (SQLSTATE 58P01): its package was probably upgraded under the running server; restart PostgreSQL")

// notSent is the error of a statement that was never sent: no connection
// could be had for it.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// NotApplied reports whether err, the error of a single statement run
// outside a transaction, proves that the statement took no effect: it was
// never sent (no connection, the tenant's share was in use, or its
// deadline passed before it went out: pgconn.SafeToRetry), or
// PostgreSQL answered it with an ERROR, which rolled it back. An error
// that lost the connection proves nothing: the statement may have
// committed. Work shared by several callers (a group) is run again by each
// caller on its own only when this holds, so that one caller's failure or
// budget never decides another's outcome, and nothing is written twice.
func NotApplied(err error) bool {
	var ns notSent
	if errors.As(err, &ns) || pgconn.SafeToRetry(err) {
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
	case "25":
		return wrongServer(code)
	}
	switch code {
	case "55P03", "40001", "40P01": // lock_not_available, serialization_failure, deadlock_detected
		return true
	}
	return false
}

// wrongServer reports a SQLSTATE of class 25 (invalid transaction state).
// The one a request meets in practice is 25006, read_only_sql_transaction:
// the connection reached a server that is (now) a standby. It is "not
// now", and the connection is discarded ([configure]), so that the pool's
// next one is opened to whichever host is the primary by then.
func wrongServer(code string) bool { return strings.HasPrefix(code, "25") }

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
	if err == nil && notReplicated(conn) {
		err = errNotReplicated
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, errNotReplicated) {
		// Committed here, perhaps nowhere else: the outcome is unknown.
		return fmt.Errorf("%w: %w: %w", ErrUnavailable, errConnLost, err)
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
			if pgconn.SafeToRetry(err) {
				// The deadline passed before the statement was sent
				// ("context already done"): it took no effect.
				return notSent{fmt.Errorf("%w: %v", cause, err)}
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
