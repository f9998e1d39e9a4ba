package lead

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestGroupLockWaitsShareOneBudget: lock_timeout bounds each wait of a
// group at 500 ms, but not their sum. Four items of workspace A whose
// inline emails another transaction is inserting would wait 4 x 500 ms and
// outlive the service's 2 s statement timeout (db.Open): the group was
// cancelled, and every item, also workspace B's, which owes nothing to A's
// locks, was answered ErrUnavailable (503). The waits now share half the
// statement timeout; the items reached after it are left to their
// callers, and the rest of the group commits in time.
func TestGroupLockWaitsShareOneBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The service's own bounds (db.Open: a 2 s statement timeout), not
	// dbtest.New's generous 5 s.
	u := dbtest.URL(t)
	d, err := db.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: groupWorkspace, Name: "group"}); err != nil {
		t.Fatal(err)
	}
	other := uuid.New()
	if _, err := db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: other, Name: "other tenant"}); err != nil {
		t.Fatal(err)
	}
	raw, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	blocker, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	innocent := groupItem(100)
	innocent.WorkspaceID, innocent.ContactEmail = other, ptr("innocent@example.com")
	items := []dbsqlc.LeadCreateParams{innocent}
	for i := range 4 {
		email := fmt.Sprintf("blocked%d@example.com", i)
		if _, err := blocker.Exec(ctx, "INSERT INTO contacts (workspace_id, id, email, created_at, updated_at) VALUES ($1, $2, $3, now(), now())",
			groupWorkspace, uuid.New(), email); err != nil {
			t.Fatal(err)
		}
		it := groupItem(i)
		it.ContactEmail = ptr(email)
		items = append(items, it)
	}
	w := &Writer{DB: d}
	start := time.Now()
	got := w.write(ctx, items)
	if took := time.Since(start); took > d.StatementTimeout() {
		t.Errorf("the group took %v, more than the statement timeout", took)
	}
	if got[0].alone || got[0].err != nil || got[0].row.ID != innocent.ID {
		t.Errorf("workspace B's item: alone=%v err=%v, want its lead", got[0].alone, got[0].err)
	}
	for i := 1; i < len(items); i++ {
		if !got[i].alone {
			t.Errorf("blocked item %d: alone=%v err=%v, want it left to its caller", i, got[i].alone, got[i].err)
		}
	}
}
