package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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
// A migration or function that cannot get its locks in time (the role's
// lock_timeout is a second, migration 00070) while the previous release
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
// which waits up to the role's lock_timeout for its locks.
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
	sqlDB := stdlib.OpenDB(*d.direct.Copy())
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
	conn, err := pgx.ConnectConfig(ctx, d.direct.Copy())
	if err != nil {
		return len(results), interpret(fmt.Errorf("connect to apply functions: %w", err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := applyFunctions(ctx, conn, functions, d.release); err != nil {
		return len(results), interpret(err)
	}
	return len(results), nil
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
