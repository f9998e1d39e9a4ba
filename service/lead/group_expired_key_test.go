package lead

import (
	"context"
	"testing"

	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestAnExpiredKeyLockedElsewhereHoldsUpOnlyItsCreate: a group whose first
// create reuses a key too old to answer, whose row another transaction is
// deleting (the retention sweep), leaves that create alone to run again
// and creates the others in the group. Since migration 00117 the group
// saves its records at the end of its statement; before 00119 the wait for
// that row came there, outside every create's own block, and failed the
// whole group.
func TestAnExpiredKeyLockedElsewhereHoldsUpOnlyItsCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := groupDB(t)
	raw := dbtest.Raw(t, d)

	reused := groupItem(0)
	reused.ContactEmail = ptr("reused@example.com")
	reused = withKey(reused, "old-key", 1) // fresh since an hour ago
	if _, err := raw.Exec(ctx, `INSERT INTO idempotency_keys (workspace_id, client_id, path, key, request_hash, record, created_at)
		VALUES ($1, $2, $3, 'old-key', '\x01', '{}', now() - interval '2 days')`, groupWorkspace, groupClient, Path); err != nil {
		t.Fatal(err)
	}
	a, b := groupItem(1), groupItem(2)
	a.ContactEmail, b.ContactEmail = ptr("a@example.com"), ptr("b@example.com")
	a, b = withKey(a, "new-a", 1), withKey(b, "new-b", 1)

	sweep, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sweep.Rollback(ctx) }()
	if n, err := sweep.Exec(ctx, "DELETE FROM idempotency_keys WHERE key = 'old-key' AND created_at < now() - interval '1 day'"); err != nil || n.RowsAffected() != 1 {
		t.Fatalf("the sweep's delete: %v %v", n, err)
	}

	got := (&Writer{DB: d}).write(ctx, []dbsqlc.LeadCreateParams{reused, a, b})
	if !got[0].alone {
		t.Errorf("the create whose old key's row is locked elsewhere: %+v, want it left to run alone", got[0])
	}
	for i := 1; i < 3; i++ {
		if got[i].alone || got[i].err != nil || got[i].row.ID != []dbsqlc.LeadCreateParams{reused, a, b}[i].ID {
			t.Errorf("create %d of the group: alone %v, err %v, lead %v; want it created in the group", i, got[i].alone, got[i].err, got[i].row.ID)
		}
	}
	var keys int
	if err := raw.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE key IN ('new-a', 'new-b') AND record IS NOT NULL").Scan(&keys); err != nil || keys != 2 {
		t.Errorf("%d records of the group's created leads (%v), want 2", keys, err)
	}
}
