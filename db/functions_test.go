package db_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/db/release"
)

// createFunction finds the function a CREATE [OR REPLACE] FUNCTION names.
var createFunction = regexp.MustCompile(`(?im)^\s*CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([a-z_][a-z0-9_]*)\s*\(`)

// keptFor finds the mark of a function kept for the previous release.
var keptFor = regexp.MustCompile(`(?m)^-- kept for release (\d+\.\d+\.\d+)\b`)

// previousRelease reads the release number in PREVIOUS_RELEASE.
func previousRelease(t *testing.T) string {
	t.Helper()
	p, err := release.Read("../" + release.File)
	if err != nil {
		t.Fatal(err)
	}
	return p.Version
}

// withoutComments drops SQL line comments, so that a name in prose is not
// taken for a call.
func withoutComments(s string) string {
	return regexp.MustCompile(`--[^\n]*`).ReplaceAllString(s, "")
}

// TestFunctionFilesAreTheLiveCode holds the rule that every live function
// of a freshly migrated database has exactly one source file, named after
// it, under db/functions, that each file defines that one function, and
// that nothing in the database is uncalled: each function is a trigger's
// or a column default's, or a query (db/queries) or another function
// calls it, or it is kept for the previous release only (its file says
// "-- kept for release X.Y.Z", the release in PREVIOUS_RELEASE, whose
// binary still calls it during an upgrade): once PREVIOUS_RELEASE moves
// past X.Y.Z, this test fails until a migration drops it and its file goes.
func TestFunctionFilesAreTheLiveCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Raw(t, dbtest.New(t))

	previous := previousRelease(t)
	files := map[string]string{} // function name → code without comments
	kept := map[string]bool{}    // kept for the previous release only
	err := fs.WalkDir(db.Functions, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(db.Functions, p)
		if err != nil {
			return err
		}
		name, ok := strings.CutSuffix(p, ".sql")
		if !ok || strings.Contains(name, "/") {
			t.Errorf("db/functions/%s: only NAME.sql files belong there", p)
			return nil
		}
		if m := keptFor.FindStringSubmatch(string(b)); m != nil {
			if m[1] != previous {
				t.Errorf("db/functions/%s is kept for release %s, but the previous release is %s: drop it in a migration and remove the file", p, m[1], previous)
			}
			kept[name] = true
		}
		code := withoutComments(string(b))
		defs := createFunction.FindAllStringSubmatch(code, -1)
		if len(defs) != 1 || defs[0][1] != name {
			t.Errorf("db/functions/%s defines %v; it must define the one function %s", p, defs, name)
		}
		files[name] = code
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	rows, err := pool.Query(ctx, `
SELECT p.proname, count(*) OVER (PARTITION BY p.proname),
       EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgfoid = p.oid)
       OR EXISTS (SELECT 1 FROM pg_depend d WHERE d.refobjid = p.oid AND d.classid = 'pg_attrdef'::regclass) AS in_schema
FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
UNION ALL
SELECT c.relname, 1, false FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('v', 'm')`)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	inSchema := map[string]bool{} // a trigger's or a column default's
	for rows.Next() {
		var name string
		var n int
		var used bool
		if err := rows.Scan(&name, &n, &used); err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			t.Errorf("%s has %d signatures in the database; an old one left behind must be dropped by a migration", name, n)
		}
		live[name] = true
		inSchema[name] = used
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(live) < 20 {
		t.Fatalf("the database shows %d functions: the query sees nothing", len(live))
	}

	queries, err := filepath.Glob("queries/*.sql")
	if err != nil || len(queries) == 0 {
		t.Fatalf("no queries found: %v", err)
	}
	var callers strings.Builder
	for _, q := range queries {
		b, err := os.ReadFile(q)
		if err != nil {
			t.Fatal(err)
		}
		callers.WriteString(withoutComments(string(b)))
	}
	for name := range live {
		if _, ok := files[name]; !ok {
			t.Errorf("%s is in the database but has no file db/functions/%s.sql", name, name)
			continue
		}
		if inSchema[name] || kept[name] {
			continue
		}
		call := regexp.MustCompile(`\b` + name + `\s*\(`)
		called := call.MatchString(callers.String())
		for other, code := range files {
			if other != name && call.MatchString(code) {
				called = true
			}
		}
		if !called {
			t.Errorf("%s is called by no query, function, trigger or column default: drop it (a migration) and remove its file", name)
		}
	}
	for name := range files {
		if !live[name] {
			t.Errorf("db/functions/%s.sql defines a function the migrated database does not have", name)
		}
	}
}

// TestEarlierDatabasesConverge migrates a database as every earlier
// release left it (the versioned migrations up to each version, the
// functions as those migrations defined them, no function file applied)
// to this release, and finds the same schema as a fresh database's:
// functions included, since the files replace whatever body a migration
// left.
func TestEarlierDatabasesConverge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := schema(t, openSQL(t, dbtest.URL(t)))

	sqlDB := openSQL(t, dbtest.EmptyURL(t))
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	sources := p.ListSources()
	if len(sources) < 30 {
		t.Fatalf("%d migrations listed", len(sources))
	}
	var versions []int64
	for _, s := range sources {
		versions = append(versions, s.Version)
	}
	for _, v := range versions {
		u := dbtest.EmptyURL(t)
		d, err := db.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.MigrateTo(ctx, d, v); err != nil {
			d.Close()
			t.Fatalf("migrate to %d: %v", v, err)
		}
		if _, err := db.Migrate(ctx, d); err != nil {
			d.Close()
			t.Fatalf("migrate from %d: %v", v, err)
		}
		d.Close()
		if lost, extra := diff(want, schema(t, openSQL(t, u))); len(lost)+len(extra) > 0 {
			t.Errorf("migrated from version %d, the schema differs from a fresh one's; lacks:\n  %s\nhas in addition:\n  %s",
				v, strings.Join(lost, "\n  "), strings.Join(extra, "\n  "))
		}
	}
}

func openSQL(t *testing.T, u string) *sql.DB {
	t.Helper()
	sqlDB, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
	return sqlDB
}

// TestMigrateWaitsForLockedTables shows that a migration that cannot get
// its lock while another transaction holds the table (the previous
// release serving) is tried again rather than failing the replica's start:
// with one try it fails with lock_not_available after the role's
// lock_timeout; with the backoff it waits, tries again once the table is
// free, and applies.
func TestMigrateWaitsForLockedTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	pool := dbtest.Raw(t, d)
	migrations := fstest.MapFS{}
	err := fs.WalkDir(db.Migrations, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(db.Migrations, p)
		migrations[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	migrations["99990_busy.sql"] = &fstest.MapFile{Data: []byte(
		"-- +goose Up\nALTER TABLE contacts ADD COLUMN busy_probe int;\n-- +goose Down\nALTER TABLE contacts DROP COLUMN busy_probe;\n")}

	hold := func() (release func()) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE contacts IN ROW EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback(ctx) }
	}

	release := hold()
	_, err = db.MigrateWith(ctx, d, migrations, db.Functions, db.Backoff{Tries: 1})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		release()
		t.Fatalf("one try on a held table: %v, want lock_not_available", err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := db.MigrateWith(ctx, d, migrations, db.Functions,
			db.Backoff{Tries: 30, First: 50 * time.Millisecond, Max: 200 * time.Millisecond})
		done <- err
	}()
	// Release the table only after a try failed and the next one waits.
	waits := func(n int) bool { return n >= 1 }
	if _, ok, err := dbtest.WaitForLockWaiters(ctx, pool, waits, 10*time.Second); !ok || err != nil {
		release()
		t.Fatalf("the migration never waited for the table: %v", err)
	}
	if _, ok, err := dbtest.WaitForLockWaiters(ctx, pool, func(n int) bool { return n == 0 }, 10*time.Second); !ok || err != nil {
		release()
		t.Fatalf("the first try never gave up: %v", err)
	}
	if _, ok, err := dbtest.WaitForLockWaiters(ctx, pool, waits, 10*time.Second); !ok || err != nil {
		release()
		t.Fatalf("no second try: %v", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("migration with a backoff: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'contacts'::regclass AND attname = 'busy_probe'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the migration's column: %d, %v", n, err)
	}
}

// TestAnOlderReleaseLeavesNewerFunctions: a function file applied by a
// release is not taken back by an older release's binary started on the
// same database (a replica of the previous release restarted during the
// upgrade, or a rollback); a newer release, or the same, applies its own;
// a function dropped by hand is made again.
func TestAnOlderReleaseLeavesNewerFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.URL(t)
	open := func(release string) *db.DB {
		d, err := db.OpenConfig(ctx, db.Config{URL: u, Release: release})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	}
	b, err := fs.ReadFile(db.Functions, "lead_default_title.sql")
	if err != nil {
		t.Fatal(err)
	}
	newer := fstest.MapFS{"lead_default_title.sql": {Data: append([]byte("-- as release 1.2.0 has it\n"), b...)}}
	older := fstest.MapFS{"lead_default_title.sql": {Data: b}}
	recorded := func() string {
		t.Helper()
		var s string
		if err := openSQL(t, u).QueryRowContext(ctx, "SELECT release FROM schema_functions WHERE name = 'lead_default_title'").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := func(release string, fsys fs.FS) {
		t.Helper()
		if _, err := db.MigrateWith(ctx, open(release), db.Migrations, fsys, db.Backoff{Tries: 1}); err != nil {
			t.Fatal(err)
		}
	}
	run("1.2.0", newer)
	if got := recorded(); got != "1.2.0" {
		t.Fatalf("after 1.2.0: recorded %q", got)
	}
	run("1.1.0", older)
	if got := recorded(); got != "1.2.0" {
		t.Errorf("1.1.0 took back 1.2.0's function: recorded %q", got)
	}
	run("1.2.0", older) // the same release may apply its own file again
	if got := recorded(); got != "1.2.0" {
		t.Errorf("1.2.0 again: recorded %q", got)
	}
	run("1.10.0", newer)
	if got := recorded(); got != "1.10.0" {
		t.Errorf("1.10.0 after 1.2.0: recorded %q", got)
	}
	// A function dropped by hand comes back at the next start, whatever
	// its record says (even for an older release: a missing function
	// serves nobody).
	if _, err := openSQL(t, u).ExecContext(ctx, "DROP FUNCTION lead_default_title"); err != nil {
		t.Fatal(err)
	}
	run("1.1.0", older)
	var n int
	if err := openSQL(t, u).QueryRowContext(ctx, "SELECT count(*) FROM pg_proc WHERE proname = 'lead_default_title'").Scan(&n); err != nil || n != 1 {
		t.Errorf("a dropped function after a start: %d of it, %v", n, err)
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{{"1.1.0", "1.2.0", true}, {"1.2.0", "1.10.0", true}, {"1.10.0", "1.2.0", false}, {"2.0.0", "1.9.9", false},
		{"1.2.0", "1.2.0", false}, {"", "1.0.0", true}, {"1.0.0", "", false}, {"v1.0.1", "1.0.0", false}} {
		if got := db.ReleaseOlder(c.a, c.b); got != c.want {
			t.Errorf("releaseOlder(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

// TestOnlyLeadCreateSetInsertsLeads holds what the event feed relies on
// since migration 00126 dropped the leads' insert trigger: every lead is
// inserted by lead_create_item_set, which writes its events (or lets
// lead_create_item_requests write a group's). A query or another function that
// inserted leads would make leads the feed never shows.
func TestOnlyLeadCreateSetInsertsLeads(t *testing.T) {
	t.Parallel()
	insert := regexp.MustCompile(`(?i)\bINSERT\s+INTO\s+(?:public\.)?leads\b`)
	files, err := filepath.Glob("queries/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	fns, err := filepath.Glob("functions/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range append(files, fns...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := len(insert.FindAllIndex([]byte(withoutComments(string(b))), -1))
		switch {
		case n > 0 && f != filepath.Join("functions", "lead_create_item_set.sql"):
			t.Errorf("%s inserts leads: only lead_create_item_set may (it writes their events)", f)
		case n > 0:
			found += n
		}
	}
	if found == 0 {
		t.Error("lead_create_item_set inserts no lead: the test reads nothing")
	}
}
