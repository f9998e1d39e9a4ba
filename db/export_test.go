package db

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// MigrateWith is [Migrate] on other migrations and function files, with
// another backoff: for tests of the migration machinery.
func MigrateWith(ctx context.Context, d *DB, migrations, functions fs.FS, b Backoff) (int, error) {
	return migrate(ctx, d, migrations, functions, b)
}

// MigrateTo applies the embedded migrations up to version and nothing
// else (no function file): a database as a release of that version left
// it, before function files existed.
func MigrateTo(ctx context.Context, d *DB, version int64) error {
	sqlDB := stdlib.OpenDB(*d.direct.Copy())
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// ReleaseOlder is releaseOlder.
var ReleaseOlder = releaseOlder
