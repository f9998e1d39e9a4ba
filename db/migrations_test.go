package db_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/db/migrationsum"
	"github.com/svat/partnerapi/db/pgserver"
)

// TestMigrationsAreHistory holds the embedded migrations to
// db/migrations.sum, and the sum file to its committed versions, as `make
// check-migrations` does: goose never applies a version twice, so a landed
// migration that changed would leave older databases silently different.
// It runs in `go test ./db` too, so a forgotten `make migrations-sum` fails
// wherever the tests run. The history part needs git; without it, it is
// skipped with a log line (package migrationsum explains the choice).
func TestMigrationsAreHistory(t *testing.T) {
	t.Parallel()
	actual, err := migrationsum.Compute(db.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("migrations.sum")
	if err != nil {
		t.Fatalf("read db/migrations.sum (run `make migrations-sum`): %v", err)
	}
	for _, p := range migrationsum.Check(file, actual) {
		t.Error(p)
	}
	listed, _, err := migrationsum.Parse(file)
	if err != nil {
		return // reported by Check
	}
	problems, note, err := migrationsum.CheckHistory(context.Background(), "migrations.sum", listed)
	if err != nil {
		t.Fatal(err)
	}
	if note != "" {
		t.Log(note)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestMigrationSumCatchesChanges shows that the check fails for each way a
// landed migration can change (edited, removed, renamed, added without
// its hash) and passes for a new migration listed with it; and that a
// committed entry cannot be rewritten by regenerating the sum file.
func TestMigrationSumCatchesChanges(t *testing.T) {
	t.Parallel()
	landed := fstest.MapFS{
		"00001_init.sql": {Data: []byte("-- +goose Up\nCREATE TABLE a (id int);\n-- +goose Down\nDROP TABLE a;\n")},
		"00002_more.sql": {Data: []byte("-- +goose Up\nCREATE TABLE b (id int);\n-- +goose Down\nDROP TABLE b;\n")},
	}
	sum := compute(t, landed)
	file := sum.Format()
	if p := migrationsum.Check(file, sum); p != nil {
		t.Fatalf("unchanged migrations: %v", p)
	}
	with := func(change func(fstest.MapFS)) migrationsum.Sum {
		fsys := fstest.MapFS{}
		for k, v := range landed {
			fsys[k] = &fstest.MapFile{Data: slices.Clone(v.Data)}
		}
		change(fsys)
		return compute(t, fsys)
	}
	added := with(func(m fstest.MapFS) {
		m["00003_new.sql"] = &fstest.MapFile{Data: []byte("-- +goose Up\nSELECT 1;\n-- +goose Down\nSELECT 1;\n")}
	})
	for _, c := range []struct {
		name   string
		actual migrationsum.Sum
		want   string
	}{
		{"edited", with(func(m fstest.MapFS) { m["00001_init.sql"].Data = append(m["00001_init.sql"].Data, ' ') }), "00001_init.sql does not match"},
		{"removed", with(func(m fstest.MapFS) { delete(m, "00002_more.sql") }), "00002_more.sql is listed but is not in"},
		{"renamed", with(func(m fstest.MapFS) { m["00002_renamed.sql"] = m["00002_more.sql"]; delete(m, "00002_more.sql") }), "00002_more.sql is listed but is not in"},
		{"added, sum not updated", added, "00003_new.sql is not listed"},
	} {
		if p := strings.Join(migrationsum.Check(file, c.actual), "\n"); !strings.Contains(p, c.want) {
			t.Errorf("%s: problems %q, want one with %q", c.name, p, c.want)
		}
	}
	if p := migrationsum.Check(added.Format(), added); p != nil {
		t.Errorf("added with the sum updated: %v", p)
	}
	hand := strings.Replace(string(added.Format()), added[2].Hash, sum[0].Hash, 1)
	if p := strings.Join(migrationsum.Check([]byte(hand), added), "\n"); !strings.Contains(p, "total does not match") {
		t.Errorf("an entry edited by hand: problems %q, want the total's", p)
	}

	// History: the sum file committed, then an edit with a regenerated sum.
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: history not tested")
	}
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com",
			"-c", "commit.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	path := filepath.Join(repo, "db", "migrations.sum")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	history := func(s migrationsum.Sum) string {
		t.Helper()
		p, _, err := migrationsum.CheckHistory(context.Background(), path, s)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(p, "\n")
	}
	git("init", "-q")
	if _, note, _ := migrationsum.CheckHistory(context.Background(), path, sum); note == "" {
		t.Error("no commit yet: no note")
	}
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "landed")
	if p := history(sum); p != "" {
		t.Errorf("unchanged: %s", p)
	}
	if p := history(added); p != "" {
		t.Errorf("a new migration: %s", p)
	}
	edited := with(func(m fstest.MapFS) { m["00002_more.sql"].Data = append(m["00002_more.sql"].Data, ' ') })
	if p := history(edited); !strings.Contains(p, "00002_more.sql changed since commit") {
		t.Errorf("edited with the sum regenerated: %q", p)
	}
	// Committed and followed by another commit: still caught.
	if err := os.WriteFile(path, edited.Format(), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "edit")
	git("commit", "-q", "--allow-empty", "-m", "later")
	if p := history(edited); !strings.Contains(p, "00002_more.sql changed since commit") {
		t.Errorf("an edit committed earlier: %q", p)
	}
	if p := history(with(func(m fstest.MapFS) { delete(m, "00001_init.sql") })); !strings.Contains(p, "00001_init.sql was committed in") {
		t.Errorf("removed: %q", p)
	}
}

func compute(t *testing.T, fsys fstest.MapFS) migrationsum.Sum {
	t.Helper()
	s, err := migrationsum.Compute(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMigrationsUpDownUp migrates an empty database up, down to version 0
// and up again, so that every Down section works and undoes its Up
// entirely: the schema after the way down is the empty one, and after the
// second way up the same as after the first. A release can then be rolled
// back with goose down, and a wrong migration fixed by a new one.
//
// It runs on a cluster of its own: 00070 sets lock_timeout on the role,
// which is cluster-wide, and its Down would reset it under the package's
// other tests.
func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "partnerapi-updown-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // as root, the server runs as postgres
		t.Fatal(err)
	}
	s, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir + "/data", Database: "updown", Role: dbtest.Role, Ephemeral: true})
	if err != nil {
		t.Fatalf("start private cluster: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	cfg, err := pgx.ParseConfig(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	n := len(p.ListSources())

	empty := schema(t, sqlDB)
	if r, err := p.Up(ctx); err != nil || len(r) != n {
		t.Fatalf("up from empty: %d of %d applied, %v", len(r), n, err)
	}
	up := schema(t, sqlDB)
	if len(up) <= len(empty) {
		t.Fatalf("the schema query sees nothing of the migrations: %q", up)
	}
	if r, err := p.DownTo(ctx, 0); err != nil || len(r) != n {
		t.Fatalf("down to 0: %d of %d reverted, %v", len(r), n, err)
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v != 0 {
		t.Fatalf("version after down to 0 = %d, %v", v, err)
	}
	if left, extra := diff(empty, schema(t, sqlDB)); len(left)+len(extra) > 0 {
		t.Errorf("down to 0 left behind what an Up created:\n  %s\nand lacks:\n  %s",
			strings.Join(extra, "\n  "), strings.Join(left, "\n  "))
	}
	if r, err := p.Up(ctx); err != nil || len(r) != n {
		t.Fatalf("up again: %d of %d applied, %v", len(r), n, err)
	}
	if lost, extra := diff(up, schema(t, sqlDB)); len(lost)+len(extra) > 0 {
		t.Errorf("the second up differs from the first; lacks:\n  %s\nhas in addition:\n  %s",
			strings.Join(lost, "\n  "), strings.Join(extra, "\n  "))
	}
}

// schema describes what migrations create, one line an object, sorted,
// goose's own table left out: relations, columns, constraints, indexes,
// views, functions, triggers, types, schemas, extensions, and the settings
// of the role and the database (ALTER ROLE … SET).
func schema(t *testing.T, sqlDB *sql.DB) []string {
	t.Helper()
	rows, err := sqlDB.QueryContext(context.Background(), `
WITH ns AS (
    SELECT oid, nspname FROM pg_namespace
    WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND nspname NOT LIKE 'pg\_temp\_%'
          AND nspname NOT LIKE 'pg\_toast\_temp\_%'
), rel AS (
    SELECT c.* FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
    WHERE c.relname NOT LIKE 'goose\_db\_version%'
)
SELECT 'schema ' || nspname FROM ns WHERE nspname <> 'public'
UNION ALL
SELECT 'extension ' || extname FROM pg_extension WHERE extname <> 'plpgsql'
UNION ALL
SELECT format('relation %s kind %s acl %s', oid::regclass, relkind, relacl) FROM rel
UNION ALL
SELECT format('column %s.%s %s%s default %s', a.attrelid::regclass, a.attname, format_type(a.atttypid, a.atttypmod),
              CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, pg_get_expr(d.adbin, d.adrelid))
FROM pg_attribute a JOIN rel ON rel.oid = a.attrelid LEFT JOIN pg_attrdef d ON (d.adrelid, d.adnum) = (a.attrelid, a.attnum)
WHERE a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT format('constraint %s.%s %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
FROM pg_constraint WHERE conrelid IN (SELECT oid FROM rel)
   OR (conrelid = 0 AND connamespace IN (SELECT oid FROM ns))
UNION ALL
SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid IN (SELECT oid FROM rel)
UNION ALL
SELECT format('view %s %s', oid::regclass, pg_get_viewdef(oid)) FROM rel WHERE relkind IN ('v', 'm')
UNION ALL
SELECT format('function %s %s', p.oid::regprocedure, CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) END)
FROM pg_proc p WHERE p.pronamespace IN (SELECT oid FROM ns)
UNION ALL
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM rel)
UNION ALL
SELECT format('type %s %s', t.oid::regtype, t.typtype) FROM pg_type t
WHERE t.typnamespace IN (SELECT oid FROM ns) AND t.typtype IN ('e', 'd', 'r', 'm')
UNION ALL
SELECT format('setting role %s database %s: %s', setrole::regrole, setdatabase, setconfig)
FROM pg_db_role_setting
WHERE setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = current_user)) AND setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
`)
	if err != nil {
		t.Fatalf("read schema: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines) // bytewise, for diff; the database's collation may differ
	return lines
}

// diff returns the lines only in a and those only in b (both sorted).
func diff(a, b []string) (onlyA, onlyB []string) {
	for _, l := range a {
		if _, ok := slices.BinarySearch(b, l); !ok {
			onlyA = append(onlyA, l)
		}
	}
	for _, l := range b {
		if _, ok := slices.BinarySearch(a, l); !ok {
			onlyB = append(onlyB, l)
		}
	}
	return onlyA, onlyB
}
