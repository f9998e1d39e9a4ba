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
// waits for it is found once it commits: the lead is about that contact,
// as alone (lead_create_item_set; it was the contacts_email conflict, which
// the handler ran again, before migration 00080).
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
	racer := uuid.New()
	if _, err := other.Exec(ctx, "INSERT INTO contacts (workspace_id, id, email, created_at, updated_at) VALUES ($1, $2, 'racing@example.com', now(), now())",
		groupWorkspace, racer); err != nil {
		t.Fatal(err)
	}
	racing := groupItem(1)
	racing.ContactEmail = ptr("racing@example.com")
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		// Commit once the racing item waits for the email (a lock wait
		// of the group's statement), usually within the group's budget.
		_, _, _ = dbtest.WaitForLockWaiters(ctx, raw, dbtest.AtLeast(1), 5*time.Second)
		_ = other.Commit(ctx)
	}()
	w := &Writer{DB: d}
	got := w.write(ctx, []dbsqlc.LeadCreateParams{keyed, racing})
	<-committed
	if g := outcome(got[0].row, got[0].err); got[0].alone || g != "key in flight" {
		t.Errorf("keyed item: alone=%v %s", got[0].alone, g)
	}
	row, err := got[1].row, got[1].err
	if got[1].alone {
		// The wait outlasted the group's lock budget (a slow machine, the
		// race detector): the item is handed back, and its caller runs it
		// alone, as Writer.Create would.
		row, err = createAlone(ctx, d.Conn(), racing)
	}
	if err != nil || row.ContactID != racer {
		t.Errorf("racing item: alone=%v %s, want a lead about the committed contact %v", got[1].alone, outcome(row, err), racer)
	}
	var contacts int
	if err := raw.QueryRow(ctx, "SELECT count(*) FROM contacts WHERE email = 'racing@example.com'").Scan(&contacts); err != nil || contacts != 1 {
		t.Errorf("%d contacts with the racing email (%v), want 1", contacts, err)
	}
}
