package rounds_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/rounds"
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

// call is one call of a round: whether it was the locked one, and
// whether it ran inside a transaction.
type call struct{ lock, inTx bool }

// inTx reports whether q runs inside a transaction block: there two
// statements share one transaction id, elsewhere each is a transaction of
// its own.
func inTx(t *testing.T, q db.DBTX) bool {
	t.Helper()
	var first, second int64
	for _, id := range []*int64{&first, &second} {
		if err := q.QueryRow(context.Background(), "SELECT txid_current()").Scan(id); err != nil {
			t.Fatal(err)
		}
	}
	return first == second
}

// setup is a database with a table the rounds write to, and a raw pool
// to look at it.
func setup(t *testing.T) (*db.DB, *pgxpool.Pool) {
	t.Helper()
	d := dbtest.New(t)
	raw := dbtest.Raw(t, d)
	if _, err := raw.Exec(context.Background(), "CREATE TABLE writes (round int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return d, raw
}

func count(t *testing.T, raw *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := raw.QueryRow(context.Background(), "SELECT count(*) FROM writes").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRunStopsAtTheFirstRoundThatDoesNotLose: one optimistic round that
// does not lose is the whole run.
func TestRunStopsAtTheFirstRoundThatDoesNotLose(t *testing.T) {
	d, _ := setup(t)
	var calls []call
	row, lost, err := rounds.Run(context.Background(), d,
		func(q db.DBTX, lock bool) (string, bool, error) {
			calls = append(calls, call{lock, inTx(t, q)})
			return "row", false, nil
		},
		func(err error) (bool, error) { t.Fatalf("resolve(%v) without an error", err); return false, nil })
	if row != "row" || lost || err != nil || len(calls) != 1 || calls[0].lock {
		t.Fatalf("Run = %q, lost %v, %v after %v", row, lost, err, calls)
	}
}

// TestRunLocksTheLastRoundInATransaction: after Attempts-1 lost
// optimistic rounds outside a transaction, the last runs with lock true
// inside one.
func TestRunLocksTheLastRoundInATransaction(t *testing.T) {
	d, _ := setup(t)
	var calls []call
	row, lost, err := rounds.Run(context.Background(), d,
		func(q db.DBTX, lock bool) (int, bool, error) {
			calls = append(calls, call{lock, inTx(t, q)})
			return len(calls), !lock, nil
		},
		func(err error) (bool, error) { return false, err })
	if lost || err != nil || row != rounds.Attempts || len(calls) != rounds.Attempts {
		t.Fatalf("Run = %d, lost %v, %v after %v", row, lost, err, calls)
	}
	for i, c := range calls {
		last := i == rounds.Attempts-1
		if c.lock != last || c.inTx != last {
			t.Errorf("round %d: lock %v, in a transaction %v; want both %v", i+1, c.lock, c.inTx, last)
		}
	}
}

// TestRunLostLastRoundRollsBack: a locked round that loses all the same
// is reported as lost, and what it wrote is rolled back.
func TestRunLostLastRoundRollsBack(t *testing.T) {
	d, raw := setup(t)
	n := 0
	_, lost, err := rounds.Run(context.Background(), d,
		func(q db.DBTX, lock bool) (struct{}, bool, error) {
			n++
			if lock {
				if _, err := q.Exec(context.Background(), "INSERT INTO writes VALUES ($1)", n); err != nil {
					t.Fatal(err)
				}
			}
			return struct{}{}, true, nil
		},
		func(err error) (bool, error) { t.Fatalf("resolve(%v) of a lost round", err); return false, nil })
	if !lost || err != nil || n != rounds.Attempts {
		t.Fatalf("Run: lost %v, %v after %d rounds, want lost after %d", lost, err, n, rounds.Attempts)
	}
	if c := count(t, raw); c != 0 {
		t.Errorf("%d writes of the lost locked round were committed", c)
	}
}

// TestRunResolvesAfterTheTransactionEnds: resolve sees the round's error
// once the locked round's transaction has rolled back (what it looks up is
// not read under that transaction's locks); its final error is Run's, and
// "again" from resolve runs another round.
func TestRunResolvesAfterTheTransactionEnds(t *testing.T) {
	d, raw := setup(t)
	taken := errors.New("unique value taken")
	final := apierror.New(apierror.CodeDuplicate, "taken by someone")
	n, resolved := 0, 0
	_, lost, err := rounds.Run(context.Background(), d,
		func(q db.DBTX, lock bool) (struct{}, bool, error) {
			n++
			if _, err := q.Exec(context.Background(), "INSERT INTO writes VALUES ($1)", n); err != nil {
				t.Fatal(err)
			}
			if lock {
				return struct{}{}, false, taken
			}
			return struct{}{}, false, errors.New("lost to a concurrent write")
		},
		func(err error) (bool, error) {
			resolved++
			if !errors.Is(err, taken) {
				return true, nil // an optimistic round's race: run again
			}
			// The locked round's transaction has ended: its write is gone
			// and no session of this database is in a transaction.
			var open int
			if err := raw.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&open); err != nil {
				t.Fatal(err)
			}
			if open != 0 || count(t, raw) != rounds.Attempts-1 {
				t.Errorf("resolve ran with %d open transactions and %d writes, want none open and the %d optimistic writes",
					open, count(t, raw), rounds.Attempts-1)
			}
			return false, final
		})
	if lost || !errors.Is(err, final) || n != rounds.Attempts || resolved != rounds.Attempts {
		t.Fatalf("Run: lost %v, %v after %d rounds and %d resolves", lost, err, n, resolved)
	}
}

// TestRunResolveEndsTheRun: an optimistic round's error that resolve
// makes final ends the run there.
func TestRunResolveEndsTheRun(t *testing.T) {
	d, _ := setup(t)
	bad := errors.New("bad input")
	n := 0
	_, lost, err := rounds.Run(context.Background(), d,
		func(db.DBTX, bool) (struct{}, bool, error) { n++; return struct{}{}, false, bad },
		func(err error) (bool, error) { return false, err })
	if lost || !errors.Is(err, bad) || n != 1 {
		t.Fatalf("Run: lost %v, %v after %d rounds, want the error after one", lost, err, n)
	}
}

// TestConflictsKeepMovingIsA503: the answer of a create that kept losing
// its unique value is retryable and keeps its cause.
func TestConflictsKeepMovingIsA503(t *testing.T) {
	err := rounds.ConflictsKeepMoving(rounds.ErrConflictGone)
	var e *apierror.Error
	if !errors.As(err, &e) || e.Code != apierror.CodeUnavailable || apierror.HTTPStatus(e.Code) != 503 || !errors.Is(err, rounds.ErrConflictGone) {
		t.Fatalf("ConflictsKeepMoving = %v, want a 503 wrapping ErrConflictGone", err)
	}
}
