package dbtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pollEvery bounds the interval between two polls of [Until]: the first
// polls follow each other within a millisecond, later ones back off to
// this, so a slow condition (an HTTP request, a query) is not hammered.
const pollEvery = 50 * time.Millisecond

// Until polls cond until it holds or limit has passed, and reports
// whether it held. Tests wait on a condition by it rather than sleeping
// for a guess of how long something takes: it returns as soon as cond
// holds, and limit only bounds how long a failing test takes. It may run
// on a goroutine the test spawned; cond must not call t.FailNow there.
func Until(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	wait := time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		t.Reset(wait)
		<-t.C
		wait = min(2*wait, pollEvery)
	}
}

// Eventually is [Until] on the test's goroutine: it fails the test, saying
// what it waited for, when cond does not hold within limit.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(limit, cond) {
		t.Fatalf("waited %v for %s", limit, what)
	}
}

// WaitForLockWaiters polls how many sessions of pool's database wait for
// a lock until until(count) holds or limit has passed, and returns the
// last count and whether until held. Tests line concurrent statements up
// by it (a statement is waiting for a row another transaction holds)
// instead of sleeping. It may run on a goroutine the test spawned: it
// reports a failed query as an error, never through t.
func WaitForLockWaiters(ctx context.Context, pool *pgxpool.Pool, until func(waiting int) bool, limit time.Duration) (waiting int, ok bool, err error) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(limit)
	for {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			return 0, false, fmt.Errorf("count lock waiters: %w", err)
		}
		if until(waiting) {
			return waiting, true, nil
		}
		if time.Now().After(deadline) {
			return waiting, false, nil
		}
		<-tick.C
	}
}

// AtLeast is a WaitForLockWaiters condition: n or more waiters.
func AtLeast(n int) func(int) bool { return func(w int) bool { return w >= n } }
