package lead

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestOneCallersBudgetDoesNotFailTheOthersOfItsGroup: a group is bounded
// by the earliest budget of its callers, so a caller whose budget was
// nearly spent (its create waits for a lock another transaction holds)
// cancelled the whole group, and every other caller of it was answered
// 503 although its own create was fine and its own budget was not spent.
// A group cancelled before it wrote anything now hands each create back to
// its own caller, who runs it alone under its own budget; and the caller
// whose budget was spent answers 503 with nothing stored (this replaces
// TestCreateAnsweredUnavailableIsNotStored, which slept to line a group
// up and passed unseen when the 503 never came).
func TestOneCallersBudgetDoesNotFailTheOthersOfItsGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := groupDB(t)
	raw := dbtest.Raw(t, d)
	blocker, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	if _, err := blocker.Exec(ctx, "INSERT INTO contacts (workspace_id, id, email, created_at, updated_at) VALUES ($1, $2, $3, now(), now())",
		groupWorkspace, uuid.New(), "locked@example.com"); err != nil {
		t.Fatal(err)
	}
	w := &Writer{DB: d}
	w.init()
	blocked := groupItem(0)
	blocked.ContactEmail = ptr("locked@example.com")
	fine := groupItem(1)
	fine.ContactID = ptr(groupContact)

	// The blocked create's caller has 20 ms of budget left (less than the
	// group's lock budget), and the group's context, as groupcommit gives
	// it, ends with the earliest budget of its callers: that one.
	bctx, bcancel := db.WithBudget(ctx, 20*time.Millisecond)
	defer bcancel()
	deadline, _ := db.Budget(bctx)
	spent := fmt.Errorf("%w: a request of the group ran out of time", db.ErrUnavailable)
	gctx, cancel := context.WithDeadlineCause(ctx, deadline, spent)
	defer cancel()
	results := w.write(gctx, []dbsqlc.LeadCreateParams{blocked, fine})
	if !results[0].alone {
		t.Fatalf("the blocked create of the cancelled group was answered %v, want it handed back to its caller", results[0].err)
	}
	// Its caller, out of budget, answers 503, and a 503 is never a stored
	// lead (the group was cancelled and rolled back; running it alone
	// fails at once).
	if _, err := w.settle(bctx, blocked, results[0]); err == nil || !errors.Is(context.Cause(bctx), db.ErrUnavailable) {
		t.Fatalf("the blocked create, its budget spent: %v (budget %v), want the budget's 503", err, context.Cause(bctx))
	}
	if !results[1].alone {
		t.Fatalf("the fine create of the cancelled group was answered %v, want it handed back to its caller", results[1].err)
	}
	fctx, fcancel := db.WithBudget(ctx, 5*time.Second)
	defer fcancel()
	row, err := w.settle(fctx, fine, results[1])
	if err != nil {
		t.Fatalf("the fine create, run alone under its own budget: %v", err)
	}
	if row.ID != fine.ID {
		t.Errorf("created %v, want %v", row.ID, fine.ID)
	}
	var n int
	if err := raw.QueryRow(ctx, "SELECT count(*) FROM leads WHERE id = $1", blocked.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the blocked create was stored although its group was cancelled")
	}
}
