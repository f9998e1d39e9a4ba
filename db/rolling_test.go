package db_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
)

// migrationsPlus is the embedded migrations and one more, named name.
func migrationsPlus(t *testing.T, name, sql string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(db.Migrations, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(db.Migrations, p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	m[name] = &fstest.MapFile{Data: []byte(sql)}
	return m
}

// TestAMigrationLosesItsDeadlocks reproduces make test-upgrade's 503: a
// migration that takes contacts' lock, then leads' (00170), against a
// request of the serving release that holds leads and then waits for
// contacts (a lead patch), before the migration asks for leads. PostgreSQL
// aborts whichever waiter checks for a deadlock first, deadlock_timeout
// after it began to wait: the request, which waited first, unless the
// migration gives up its wait sooner (half the deadlock_timeout). Then the
// request goes on, and the migration, tried again, applies.
func TestAMigrationLosesItsDeadlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	pool := dbtest.Raw(t, d)
	// Between its two locks the migration waits (2 s at most) until the
	// request waits for contacts, so that the request waits first.
	migrations := migrationsPlus(t, "99990_two_tables.sql", `-- +goose Up
ALTER TABLE contacts ADD COLUMN deadlock_probe int;
-- +goose StatementBegin
DO $$
BEGIN
    FOR i IN 1 .. 400 LOOP
        EXIT WHEN EXISTS (SELECT FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock'
                          AND query LIKE '%deadlock probe request%');
        PERFORM pg_sleep(0.005);
        PERFORM pg_stat_clear_snapshot();
    END LOOP;
END
$$;
-- +goose StatementEnd
ALTER TABLE leads ADD COLUMN deadlock_probe int;
-- +goose Down
ALTER TABLE leads DROP COLUMN deadlock_probe;
ALTER TABLE contacts DROP COLUMN deadlock_probe;
`)

	// The request holds leads, as a lead patch does after its UPDATE.
	req, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = req.Rollback(ctx) }()
	if _, err := req.Exec(ctx, "LOCK TABLE leads IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.MigrateWith(ctx, d, migrations, db.Functions,
			db.Backoff{Tries: 100, First: 20 * time.Millisecond, Max: 100 * time.Millisecond})
		done <- err
	}()
	// The migration holds contacts.
	var lookErr error
	held := dbtest.Until(10*time.Second, func() bool {
		var held bool
		lookErr = pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE relation = 'contacts'::regclass
			AND mode = 'AccessExclusiveLock' AND granted)`).Scan(&held)
		return held || lookErr != nil
	})
	if lookErr != nil {
		t.Fatal(lookErr)
	}
	if !held {
		t.Fatal("the migration never took contacts")
	}
	// Now the request needs contacts: a deadlock once the migration asks
	// for leads.
	if _, err := req.Exec(ctx, "LOCK TABLE contacts IN ROW EXCLUSIVE MODE -- deadlock probe request"); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			t.Fatalf("the request lost to the migration: %s (%s)", pgErr.Message, pgErr.Code)
		}
		t.Fatal(err)
	}
	if err := req.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the migration, tried again: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_attribute WHERE attname = 'deadlock_probe'
		AND attrelid IN ('contacts'::regclass, 'leads'::regclass)`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("the migration's columns: %d, %v", n, err)
	}
}
