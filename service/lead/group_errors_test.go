package lead

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestGroupErrorsOfConcurrentTransactions: a key held by another
// transaction (another replica's create) is 409 in the group as alone,
// and an inline email committed by another transaction while the item
// waits for it is the contacts_email conflict, as alone.
func TestGroupErrorsOfConcurrentTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := groupDB(t)
	raw := dbtest.Raw(t, d)
	other, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	keyed := withKey(groupItem(0), "held", 1)
	keyed.ContactID = ptr(groupContact)
	if _, err := other.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", *keyed.LockKey); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "INSERT INTO contacts (workspace_id, id, email, created_at, updated_at) VALUES ($1, $2, 'racing@example.com', now(), now())",
		groupWorkspace, uuid.New()); err != nil {
		t.Fatal(err)
	}
	racing := groupItem(1)
	racing.ContactEmail = ptr("racing@example.com")
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		// Commit once the racing item waits for the email (a lock wait
		// of the group's statement), well within its 500 ms bound.
		_, _, _ = dbtest.WaitForLockWaiters(ctx, raw, dbtest.AtLeast(1), 5*time.Second)
		_ = other.Commit(ctx)
	}()
	w := &Writer{DB: d}
	got := w.write(ctx, []dbsqlc.LeadCreateParams{keyed, racing})
	<-committed
	if g := outcome(got[0].row, got[0].err); got[0].alone || g != "key in flight" {
		t.Errorf("keyed item: alone=%v %s", got[0].alone, g)
	}
	if g := outcome(got[1].row, got[1].err); got[1].alone || g != "conflict contacts_email" {
		t.Errorf("racing item: alone=%v %s", got[1].alone, g)
	}
}
