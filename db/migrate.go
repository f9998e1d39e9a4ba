package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Migrate applies the embedded migrations that are not applied yet and
// returns how many it applied. Concurrent callers are serialised by goose's
// session lock, so replicas may all migrate at start-up. The lock is held
// by a session, which a transaction pooler would not keep, so migrations
// run on the direct URL ([Config.DirectURL]).
func Migrate(ctx context.Context, d *DB) (int, error) {
	sqlDB := stdlib.OpenDB(*d.direct.Copy())
	defer sqlDB.Close()
	sqlDB.SetMaxOpenConns(2)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("create migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("create migration provider: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, interpret(fmt.Errorf("apply migrations: %w", err))
	}
	return len(results), nil
}

// Pending reports whether any embedded migration is not applied. /readyz
// uses it.
func Pending(ctx context.Context, d *DB) (bool, error) {
	sqlDB := stdlib.OpenDBFromPool(d.pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations)
	if err != nil {
		return false, fmt.Errorf("create migration provider: %w", err)
	}
	pending, err := p.HasPending(ctx)
	return pending, interpret(err)
}
