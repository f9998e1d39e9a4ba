package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Migrate applies the embedded migrations that are not applied yet, then
// the function files that changed ([Functions]), and returns how many
// migrations it applied. Concurrent callers are serialised by goose's
// session lock, so replicas may all migrate at start-up. The lock is held
// by a session, which a transaction pooler would not keep, so migrations
// run on the direct URL ([Config.DirectURL]).
//
// A migration or function that cannot get its locks in time (half the
// deadlock_timeout, [migrationLockTimeout]) while the previous release
// serves is tried again with a bounded backoff ([MigrateBackoff]) instead
// of failing the replica's start: goose applies each migration in a
// transaction of its own, so a try that failed left nothing half done.
func Migrate(ctx context.Context, d *DB) (int, error) {
	return migrate(ctx, d, Migrations, Functions, MigrateBackoff)
}

// Backoff is how often and how patiently [Migrate] tries again when the
// locks it needs are held by others: Tries tries at most, the first wait
// First, each next one doubled up to Max.
type Backoff struct {
	Tries      int
	First, Max time.Duration
}

// MigrateBackoff is [Migrate]'s: 12 tries over about a minute, each of
// which waits up to [migrationLockTimeout] for each of its locks.
var MigrateBackoff = Backoff{Tries: 12, First: 250 * time.Millisecond, Max: 8 * time.Second}

// migrate is [Migrate] on given migrations and function files.
func migrate(ctx context.Context, d *DB, migrations, functions fs.FS, b Backoff) (int, error) {
	applied := 0
	wait := b.First
	for try := 1; ; try++ {
		n, err := migrateOnce(ctx, d, migrations, functions)
		applied += n
		if err == nil || !lockBusy(err) || try >= b.Tries {
			return applied, err
		}
		slog.WarnContext(ctx, "migration waits for locks held by others; trying again", "try", try, "wait_ms", wait.Milliseconds(), "error", err)
		select {
		case <-ctx.Done():
			return applied, err
		case <-time.After(wait):
		}
		wait = min(2*wait, b.Max)
	}
}

// migrateOnce applies the migrations, then the function files.
func migrateOnce(ctx context.Context, d *DB, migrations, functions fs.FS) (int, error) {
	cfg, err := migrationConfig(ctx, d)
	if err != nil {
		return 0, err
	}
	sqlDB := stdlib.OpenDB(*cfg.Copy())
	defer sqlDB.Close()
	sqlDB.SetMaxOpenConns(2)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("create migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("create migration provider: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return len(results), interpret(fmt.Errorf("apply migrations: %w", err))
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return len(results), interpret(fmt.Errorf("connect to apply functions: %w", err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := applyFunctions(ctx, conn, functions, d.release); err != nil {
		return len(results), interpret(err)
	}
	return len(results), nil
}

// migrationConfig is the direct URL's configuration with the lock_timeout
// of [migrationLockTimeout].
func migrationConfig(ctx context.Context, d *DB) (*pgx.ConnConfig, error) {
	cfg := d.direct.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, interpret(fmt.Errorf("connect to migrate: %w", err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	limits, err := Q.MigrationWaitLimits(ctx, conn)
	if err != nil {
		return nil, interpret(fmt.Errorf("read lock limits: %w", err))
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(migrationLockTimeout(limits.DeadlockMs, limits.LockMs), 10)
	return cfg, nil
}

// migrationLockTimeout is how long, in milliseconds, a migration waits
// for a lock: half the server's deadlock_timeout, or the role's
// lock_timeout if that is shorter. A migration that takes two tables'
// locks (00170: contacts, then leads) can deadlock with a request of the
// previous release that holds one and waits for the other. PostgreSQL
// aborts whichever of the two first checks for a deadlock, deadlock_timeout
// after it began to wait; giving up sooner makes the migration the one
// that stops, and [Migrate] tries it again, where the request would have
// answered 503 (make test-upgrade saw it once). The migration's waits are
// also the requests' stalls: every request that needs the table waits
// behind a migration waiting for its lock.
func migrationLockTimeout(deadlockMs, lockMs int64) int64 {
	t := max(deadlockMs/2, 1)
	if lockMs > 0 {
		t = min(t, lockMs)
	}
	return t
}

// lockBusy reports an error of a statement that could not get its locks in
// time, or lost to another transaction's: the same statement may pass
// once the others are done.
func lockBusy(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "55P03", "40P01", "40001": // lock_not_available, deadlock_detected, serialization_failure
		return true
	}
	return false
}

// Pending reports whether any embedded migration is not applied, or any
// function file not applied as it is. /readyz uses it.
func Pending(ctx context.Context, d *DB) (bool, error) {
	sqlDB := stdlib.OpenDBFromPool(d.pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations)
	if err != nil {
		return false, fmt.Errorf("create migration provider: %w", err)
	}
	pending, err := p.HasPending(ctx)
	if err != nil || pending {
		return pending, interpret(err)
	}
	fns, err := embeddedFunctions()
	if err != nil {
		return false, err
	}
	applied, present, err := appliedFunctions(ctx, d.pool, fns)
	if err != nil {
		return false, interpret(err)
	}
	return len(changedFunctions(fns, applied, present, d.release)) > 0, nil
}
