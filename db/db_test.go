package db_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

func TestWithTxRollsBackOnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	id := uuid.New()
	boom := errors.New("boom")
	err := d.WithTx(ctx, func(tx db.DBTX) error {
		if _, err := db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: id, Name: "rolled back"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WithTx error = %v, want the callback's error", err)
	}
	if _, err := db.Q.WorkspaceGet(ctx, d.Conn(), id); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("workspace after rollback: err = %v, want ErrNotFound", err)
	}
}

func TestWithTxRollsBackOnPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	id := uuid.New()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic was swallowed")
			}
		}()
		_ = d.WithTx(ctx, func(tx db.DBTX) error {
			if _, err := db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: id, Name: "x"}); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if _, err := db.Q.WorkspaceGet(ctx, d.Conn(), id); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("workspace after panic: err = %v, want ErrNotFound", err)
	}
}

func TestWithTxCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	id := uuid.New()
	if err := d.WithTx(ctx, func(tx db.DBTX) error {
		_, err := db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: id, Name: "kept"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	w, err := db.Q.WorkspaceGet(ctx, d.Conn(), id)
	if err != nil || w.Name != "kept" {
		t.Fatalf("WorkspaceGet = %+v, %v", w, err)
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)

	_, err := db.Q.WorkspaceGet(ctx, d.Conn(), uuid.New())
	if !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("no rows: err = %v, want ErrNotFound", err)
	}

	ws, err := db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: uuid.New(), Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: ws.ID, Name: "again"})
	var conflict *db.ConflictError
	if !errors.As(err, &conflict) || conflict.Constraint != "workspaces_pkey" || conflict.ForeignKey {
		t.Fatalf("duplicate key: err = %v, want ConflictError on workspaces_pkey", err)
	}

	_, err = db.Q.MemberCreate(ctx, d.Conn(), dbsqlc.MemberCreateParams{WorkspaceID: uuid.New(), ID: uuid.New(), Email: "a@b.co"})
	if !errors.As(err, &conflict) || !conflict.ForeignKey {
		t.Fatalf("missing parent: err = %v, want foreign key ConflictError", err)
	}
}

func TestMigrateAppliesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A database that is not a clone of the migrated template.
	d := dbtest.New(t)
	if _, err := dbtest.Raw(t, d).Exec(ctx, "DROP SCHEMA public CASCADE; DROP SCHEMA IF EXISTS search CASCADE; DROP SCHEMA IF EXISTS extensions CASCADE; CREATE SCHEMA public"); err != nil {
		t.Fatal(err)
	}
	pending, err := db.Pending(ctx, d)
	if err != nil || !pending {
		t.Fatalf("Pending on empty database = %v, %v; want true", pending, err)
	}
	n, err := db.Migrate(ctx, d)
	if err != nil || n == 0 {
		t.Fatalf("first Migrate = %d, %v; want >0 applied", n, err)
	}
	n, err = db.Migrate(ctx, d)
	if err != nil || n != 0 {
		t.Fatalf("second Migrate = %d, %v; want 0 applied", n, err)
	}
	pending, err = db.Pending(ctx, d)
	if err != nil || pending {
		t.Fatalf("Pending after Migrate = %v, %v; want false", pending, err)
	}
}

// TestStatementCachedBeforeAMigration: a statement prepared and cached on
// a connection (cache_statement) before a migration changed the type of a
// column it returns fails once on that connection ("cached plan must not
// change result type"); pgx then forgets it, and the next execution
// prepares it again. That failure is "not now", ErrUnavailable (503 with
// Retry-After), not an internal error (500): every pooled connection of a
// running replica meets it once per statement after a rolling deploy's
// migration.
func TestStatementCachedBeforeAMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.URL(t)
	d, err := db.OpenConfig(ctx, db.Config{URL: u, MaxConns: 1}) // one connection: the one that cached the statement
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	get := func() error {
		_, err := db.Q.ContactGet(ctx, d.Conn(), dbsqlc.ContactGetParams{WorkspaceID: uuid.New(), ID: uuid.New()})
		return err
	}
	if err := get(); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("before the migration: %v", err)
	}
	raw, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	if _, err := raw.Exec(ctx, "ALTER TABLE contacts ALTER COLUMN job_title TYPE varchar(300)"); err != nil {
		t.Fatal(err)
	}
	if err := get(); !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("first execution after the migration: %v, want db.ErrUnavailable", err)
	}
	if err := get(); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("second execution after the migration: %v", err)
	}
}
