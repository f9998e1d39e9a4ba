package servertest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
)

// PatchWhileErased sends a merge PATCH of body to path while the erasure
// of a deleted custom field's values reaches the record (table "contacts"
// or "leads", the record ws/id): a transaction holds the record's row
// until the PATCH, which has read the record, waits to write it; it then
// removes key from the record's values as the erasure's batch does
// (CustomFieldEraseQuiet: no event, change_xid kept) and commits. It
// returns the PATCH's status and body, and the values the record stores
// after it.
func (h *Harness) PatchWhileErased(t testing.TB, token, table string, ws, id uuid.UUID, key, path, body string) (status int, answer, stored []byte) {
	t.Helper()
	if table != "contacts" && table != "leads" {
		t.Fatalf("PatchWhileErased: table %q", table)
	}
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+table+` WHERE workspace_id = $1 AND id = $2 FOR UPDATE`, ws, id); err != nil {
		t.Fatal(err)
	}
	type result struct {
		status int
		body   []byte
	}
	done := make(chan result, 1)
	go func() {
		s, _, b := h.Do(http.MethodPatch, path, token, "application/merge-patch+json", body)
		done <- result{s, b}
	}()
	if n, ok, err := dbtest.WaitForLockWaiters(ctx, raw, dbtest.AtLeast(1), 10*time.Second); err != nil || !ok {
		t.Fatalf("the PATCH never waited for the %s row (%d waiting, %v)", table, n, err)
	}
	if err := db.Q.CustomFieldEraseQuiet(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+table+` SET custom_fields = nullif(custom_fields - $3::text, '{}'::jsonb)
		WHERE workspace_id = $1 AND id = $2`, ws, id, key); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if err := raw.QueryRow(ctx, `SELECT custom_fields FROM `+table+` WHERE workspace_id = $1 AND id = $2`, ws, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	return r.status, r.body, stored
}
