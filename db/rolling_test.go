package db_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
// request of the serving release that holds leads and then needs
// contacts (a lead patch). PostgreSQL aborts whichever waiter checks for a
// deadlock first; the migration gives up its wait before the request's
// check (half the deadlock_timeout), so the request goes on and the
// migration, tried again, applies.
func TestAMigrationLosesItsDeadlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	pool := dbtest.Raw(t, d)
	migrations := migrationsPlus(t, "99990_two_tables.sql", "-- +goose Up\n"+
		"ALTER TABLE contacts ADD COLUMN deadlock_probe int;\nALTER TABLE leads ADD COLUMN deadlock_probe int;\n"+
		"-- +goose Down\nALTER TABLE leads DROP COLUMN deadlock_probe;\nALTER TABLE contacts DROP COLUMN deadlock_probe;\n")

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
	// The migration holds contacts and waits for leads.
	if _, ok, err := dbtest.WaitForLockWaiters(ctx, pool, func(n int) bool { return n >= 1 }, 10*time.Second); !ok || err != nil {
		t.Fatalf("the migration never waited for leads: %v", err)
	}
	// Now the request needs contacts: a deadlock, unless the migration
	// stepped aside first.
	if _, err := req.Exec(ctx, "LOCK TABLE contacts IN ROW EXCLUSIVE MODE"); err != nil {
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
}

// TestContactCreateAnswersWhileTheTableGainsAColumn reproduces make
// test-upgrade's 500 "wrong record type supplied in RETURN NEXT": a
// contact_create of the previous release under way (waiting for its
// insert) while a migration adds a column to contacts answered its row as
// the table's new type into a result shaped by the old one. It names its
// columns now (00168).
func TestContactCreateAnswersWhileTheTableGainsAColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	pool := dbtest.Raw(t, d)
	// One connection of the serving release, warm: it knows contacts'
	// row type from its earlier creates.
	conn, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	ws := uuid.New()
	if _, err := pool.Exec(ctx, "INSERT INTO workspaces (id, name) VALUES ($1, 'Rolling')", ws); err != nil {
		t.Fatal(err)
	}
	create := func(email string) (string, error) {
		// 1.1.0's statement (db/dbsqlc at d4373b3), less the columns it
		// does not read.
		var got string
		err := conn.QueryRow(ctx, `SELECT email FROM contact_create($1, NULL, '/v1/contacts', NULL, NULL, 0, now(),
			$2, $3, NULL, 'Ro', 'Ling', NULL, NULL, NULL)`, ws, uuid.New(), email).Scan(&got)
		return got, err
	}
	if _, err := create("warm@example.com"); err != nil {
		t.Fatal(err)
	}
	// The migration adds the column and has not committed yet.
	mig, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mig.Rollback(ctx) }()
	if _, err := mig.Exec(ctx, "ALTER TABLE contacts ADD COLUMN rolling_probe int"); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		email string
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.email, a.err = create("rolling@example.com")
		done <- a
	}()
	// The create waits for its insert.
	if _, ok, err := dbtest.WaitForLockWaiters(ctx, pool, func(n int) bool { return n >= 1 }, 10*time.Second); !ok || err != nil {
		t.Fatalf("the create never waited for the table: %v", err)
	}
	if err := mig.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.email != "rolling@example.com" {
		t.Fatalf("contact_create across the column's commit: %q, %v", a.email, a.err)
	}
}
