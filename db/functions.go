package db

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db/dbsqlc"
)

//go:embed functions/*.sql
var functionFS embed.FS

// Functions is the database's live code: one file per function or trigger
// function (and view, should one come), named after it, each a CREATE OR
// REPLACE that can run again. They are applied after the versioned
// migrations, each whenever its SHA-256 differs from the one the database
// recorded (table schema_functions), so a change to a function is a diff of
// its file, not a restatement in a new migration. sqlc reads them after the
// migrations. What a file may change is bounded by the previous release,
// which runs on the same database during a rolling upgrade: see
// CONTRIBUTING.md, "Changing the database".
var Functions, _ = fs.Sub(functionFS, "functions")

// function is one file of [Functions].
type function struct {
	name string // the file's name less .sql: the function's
	sql  string
	sum  []byte // SHA-256 of sql
}

// embeddedFunctions is [Functions] read and hashed once: /readyz asks
// [Pending] on every probe, and the files never change in a running
// binary.
var embeddedFunctions = sync.OnceValues(func() ([]function, error) { return readFunctions(Functions) })

// readFunctions lists fsys's function files in name order.
func readFunctions(fsys fs.FS) ([]function, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list function files: %w", err)
	}
	slices.Sort(names)
	fns := make([]function, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read function file %s: %w", n, err)
		}
		sum := sha256.Sum256(b)
		fns = append(fns, function{name: strings.TrimSuffix(path.Base(n), ".sql"), sql: string(b), sum: sum[:]})
	}
	return fns, nil
}

// changedFunctions returns the files of fns that release should apply:
// those whose SHA-256 is not the one recorded in applied, unless a newer
// release than release applied them. During a rolling upgrade the previous
// release may start again (a replica restarted, or a rollback); it then
// runs on the newer release's functions, which a release keeps compatible
// with the one before it (CONTRIBUTING.md), rather than taking them back
// from under the newer replicas still serving. An unnumbered build
// (release "": tests, benchmarks) applies what differs. A file whose
// object is missing from the database (present, by name: dropped by hand)
// is applied again whatever its record says.
func changedFunctions(fns []function, applied map[string]dbsqlc.SchemaFunctionsListRow, present map[string]bool, release string) []function {
	var changed []function
	for _, f := range fns {
		a, ok := applied[f.name]
		if ok && bytes.Equal(a.Sha256, f.sum) && present[f.name] {
			continue
		}
		if ok && present[f.name] && release != "" && releaseOlder(release, a.Release) {
			continue
		}
		changed = append(changed, f)
	}
	return changed
}

// releaseOlder reports whether release a (MAJOR.MINOR.PATCH) is older than
// b. A number that does not parse counts as older than any that does.
func releaseOlder(a, b string) bool {
	pa, oka := parseRelease(a)
	pb, okb := parseRelease(b)
	switch {
	case !okb:
		return false
	case !oka:
		return true
	}
	return slices.Compare(pa, pb) < 0
}

// parseRelease reads MAJOR.MINOR.PATCH (a leading v allowed).
func parseRelease(r string) ([]int, bool) {
	parts := strings.Split(strings.TrimPrefix(r, "v"), ".")
	if len(parts) != 3 {
		return nil, false
	}
	n := make([]int, 3)
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return nil, false
		}
		n[i] = v
	}
	return n, true
}

// appliedFunctions reads what was recorded of each function file, and
// which of fns' objects the database has.
func appliedFunctions(ctx context.Context, q DBTX, fns []function) (map[string]dbsqlc.SchemaFunctionsListRow, map[string]bool, error) {
	rows, err := Q.SchemaFunctionsList(ctx, q)
	if err != nil {
		return nil, nil, fmt.Errorf("list applied functions: %w", err)
	}
	applied := make(map[string]dbsqlc.SchemaFunctionsListRow, len(rows))
	for _, r := range rows {
		applied[r.Name] = r
	}
	names := make([]string, len(fns))
	for i, f := range fns {
		names[i] = f.name
	}
	found, err := Q.SchemaFunctionsPresent(ctx, q, names)
	if err != nil {
		return nil, nil, fmt.Errorf("list present functions: %w", err)
	}
	present := make(map[string]bool, len(found))
	for _, n := range found {
		present[n] = true
	}
	return applied, present, nil
}

// applyFunctions applies the function files of fsys that release should
// apply ([changedFunctions]), in one transaction on conn, and returns
// their names. Replicas starting at once
// take turns (SchemaFunctionsLock), and each applies only what the one
// before it left different. Function bodies are not checked against the
// objects they name when they are created (check_function_bodies off), so
// the files' order does not matter; make lint checks them all
// (plpgsql_check) once applied.
func applyFunctions(ctx context.Context, conn *pgx.Conn, fsys fs.FS, release string) ([]string, error) {
	fns, err := readFunctions(fsys)
	if err != nil {
		return nil, err
	}
	var names []string
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := Q.SchemaFunctionsLock(ctx, tx); err != nil {
			return fmt.Errorf("lock function files: %w", err)
		}
		applied, present, err := appliedFunctions(ctx, tx, fns)
		if err != nil {
			return err
		}
		changed := changedFunctions(fns, applied, present, release)
		if len(changed) == 0 {
			return nil
		}
		if err := Q.SchemaFunctionsUnchecked(ctx, tx); err != nil {
			return fmt.Errorf("turn function body checks off: %w", err)
		}
		for _, f := range changed {
			if _, err := tx.Exec(ctx, f.sql); err != nil {
				return fmt.Errorf("apply function file %s.sql: %w", f.name, err)
			}
			if err := Q.SchemaFunctionSave(ctx, tx, dbsqlc.SchemaFunctionSaveParams{Name: f.name, Sha256: f.sum, Release: release}); err != nil {
				return fmt.Errorf("record function file %s.sql: %w", f.name, err)
			}
			names = append(names, f.name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}
