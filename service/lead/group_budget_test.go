package lead

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestCreateAnsweredUnavailableIsNotStored: a create whose request budget
// ran out while its group was in the database was answered with the
// budget's error (the server's 503, "retry later"), yet its group went on
// and committed its lead, where a lone LeadCreate is cancelled with its
// budget and rolls back: a client retrying the 503 without an
// Idempotency-Key got a second lead. A group now ends by the earliest
// deadline of its callers, and a caller whose item is in a group waits
// for the group's answer: a 503 is never a stored lead.
func TestCreateAnsweredUnavailableIsNotStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := groupDB(t)
	raw := dbtest.Raw(t, d)
	blocker, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	for _, e := range []string{"blocked1@example.com", "blocked2@example.com"} {
		if _, err := blocker.Exec(ctx, "INSERT INTO contacts (workspace_id, id, email, created_at, updated_at) VALUES ($1, $2, $3, now(), now())",
			groupWorkspace, uuid.New(), e); err != nil {
			t.Fatal(err)
		}
	}
	w := &Writer{DB: d}
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { _ = w.Run(rctx); close(ran) }()
	defer func() { stop(); <-ran }()
	time.Sleep(50 * time.Millisecond) // Run has opened the queue

	// Group 1: one item waiting 500 ms for a lock.
	b1 := groupItem(0)
	b1.ContactEmail = ptr("blocked1@example.com")
	bg := make(chan struct{}, 2)
	go func() { _, err := w.Create(ctx, b1); t.Logf("b1: %v", err); bg <- struct{}{} }()
	time.Sleep(100 * time.Millisecond)
	// Queued meanwhile, in this order: group 2 is [mine, b2], and b2
	// waits 500 ms for its lock after mine is done.
	mine := groupItem(1)
	mine.ContactID = ptr(groupContact)
	bctx, cancel := db.WithBudget(ctx, 700*time.Millisecond) // as the server's errorInterceptor
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := w.Create(bctx, mine)
		t.Logf("mine answered after %v", time.Since(start))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	b2 := groupItem(2)
	b2.ContactEmail = ptr("blocked2@example.com")
	go func() { _, _ = w.Create(ctx, b2); bg <- struct{}{} }()

	err = <-errc
	// Wait until group 2 has ended (b2 is then run alone; unblock it).
	time.Sleep(1500 * time.Millisecond)
	_ = blocker.Rollback(ctx)
	<-bg
	<-bg
	unavailable := err != nil && errors.Is(context.Cause(bctx), db.ErrUnavailable) // the server's unavailable(): 503
	var n int
	if err := raw.QueryRow(ctx, "SELECT count(*) FROM leads WHERE id = $1", mine.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	t.Logf("create answered %v (503: %v); %d lead stored", err, unavailable, n)
	if unavailable && n == 1 {
		t.Fatalf("the create was answered 503 (%v), and its lead %v is stored", err, mine.ID)
	}
}
