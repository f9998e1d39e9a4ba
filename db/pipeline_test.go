package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestPipelineTransaction runs a transaction of generated queries in two
// round trips, and checks that a failed statement rolls all of it back.
func TestPipelineTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	a, b := uuid.New(), uuid.New()

	err := d.WithSession(ctx, func(s *db.Session) error {
		p := s.Pipeline()
		var missing error
		p.Exec("BEGIN")
		p.Go(func(tx db.DBTX) { _, missing = db.Q.WorkspaceGet(ctx, tx, a) })
		if err := p.Flush(ctx); err != nil {
			return err
		}
		if !errors.Is(missing, db.ErrNotFound) {
			t.Errorf("lookup of a missing row: %v, want ErrNotFound", missing)
		}
		var created dbsqlc.Workspace
		var createErr error
		p.Go(func(tx db.DBTX) {
			created, createErr = db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: a, Name: "piped"})
		})
		p.Exec("COMMIT")
		if err := p.Flush(ctx); err != nil {
			return err
		}
		if createErr != nil || created.Name != "piped" {
			t.Errorf("create in pipeline: %+v %v", created, createErr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if w, err := db.Q.WorkspaceGet(ctx, d.Conn(), a); err != nil || w.Name != "piped" {
		t.Fatalf("committed row: %+v %v", w, err)
	}

	// A duplicate key aborts the transaction: nothing of it stays.
	err = d.WithSession(ctx, func(s *db.Session) error {
		p := s.Pipeline()
		p.Exec("BEGIN")
		p.Go(func(tx db.DBTX) { _, _ = db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: b, Name: "b"}) })
		p.Go(func(tx db.DBTX) {
			_, _ = db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: a, Name: "dup"})
		})
		p.Exec("COMMIT")
		return p.Flush(ctx)
	})
	var conflict *db.ConflictError
	if !errors.As(err, &conflict) || conflict.Constraint != "workspaces_pkey" {
		t.Fatalf("duplicate in pipeline: %v, want a ConflictError", err)
	}
	if _, err := db.Q.WorkspaceGet(ctx, d.Conn(), b); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("row of an aborted pipeline transaction: %v", err)
	}
	// The connection went back to the pool usable.
	for range 10 {
		if _, err := db.Q.WorkspaceGet(ctx, d.Conn(), a); err != nil {
			t.Fatal(err)
		}
	}
}
