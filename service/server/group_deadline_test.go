package server_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/service/servertest"
)

// TestShortClientDeadlineDoesNotFailOtherCreatesOfItsGroup: a lead create
// that shares a group (lead.Writer, groupcommit) with a request whose
// caller sent a short Connect-Timeout-Ms must not fail because of it. The
// group's context took the earliest deadline of its callers, which a
// client chooses, so one client (any tenant) could make every create
// grouped with its own answer 503 long before their budget. A group is now
// bounded by its callers' server budgets (db.Budget) only.
func TestShortClientDeadlineDoesNotFailOtherCreatesOfItsGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.URL(t)
	d, err := db.Open(ctx, u) // production bounds: statement 2 s, so group lock waits of at most 500 ms
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	h := servertest.New(t, servertest.Options{DB: d})
	tn := h.NewFastTenant("Victim Co")
	other := h.NewFastTenant("Impatient Co")
	raw, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)

	// An uncommitted contact holds an email: creates of leads with that
	// inline contact wait for it (at most lock_timeout, 500 ms, in a group).
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO contacts (workspace_id, id, email, created_at, updated_at)
		SELECT id, $1, 'held@x.co', now(), now() FROM workspaces WHERE name = 'Impatient Co'`, uuid.New()); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	// A keeps the writer busy for 500 ms, so that the next two creates queue
	// and form one group.
	aDone := make(chan struct{})
	wg.Go(func() {
		defer close(aDone)
		post(h, "/api/v1/leads", other.Token, "application/json", `{"contact":{"email":"held@x.co"}}`)
	})
	waitForLockWaiters(t, raw, 1)
	// B: a Connect client that allows itself 700 ms, whose create waits for
	// the same lock. V: an ordinary create of another tenant.
	wg.Go(func() {
		post(h, "/partner.lead.v1.LeadService/CreateLead", other.Token, "application/json",
			`{"lead":{"contact":{"email":"held@x.co"}}}`, "Connect-Timeout-Ms", "700", "Connect-Protocol-Version", "1")
	})
	// B is in the writer before V is sent: two creates in it (A and B), or
	// B alone if A has already given up its wait.
	dbtest.Eventually(t, 5*time.Second, "B's create in the lead writer", func() bool {
		select {
		case <-aDone:
			return h.Server.Leads.Active() >= 1
		default:
			return h.Server.Leads.Active() >= 2
		}
	})
	s, _, b, took := post(h, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"victim@x.co"}}`)
	_ = tx.Rollback(ctx)
	wg.Wait()
	if s != http.StatusCreated {
		t.Fatalf("a create grouped with another client's 700 ms deadline: %d after %v (budget 4 s, database fine): %s", s, took.Round(time.Millisecond), b)
	}
}

// waitForLockWaiters waits until n statements of the database wait for a lock.
func waitForLockWaiters(t *testing.T, raw *pgxpool.Pool, n int) {
	t.Helper()
	waiting, ok, err := dbtest.WaitForLockWaiters(context.Background(), raw, dbtest.AtLeast(n), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("%d statements wait for a lock, want %d", waiting, n)
	}
}
