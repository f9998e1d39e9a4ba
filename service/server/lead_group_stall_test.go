package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
)

// TestOneTenantsLockWaitingLeadCreatesDoNotSlowAnothersLeadCreates: tenant
// A's single lead creates whose inline contact email is being inserted by
// another of A's transactions still in flight (a contact batch that itself
// waits up to lock_timeout) wait for that lock inside lead_create_group,
// which is shared by every tenant's single creates, one group at a time.
// The raw transaction below stands in for A's in-flight batch. Tenant B's
// single lead creates must not wait behind A's lock waits.
func TestOneTenantsLockWaitingLeadCreatesDoNotSlowAnothersLeadCreates(t *testing.T) {
	h, raw := productionHarness(t)
	a := h.NewFastTenant("attacker")
	b := h.NewFastTenant("victim")
	timed := timedSender(h)
	send := func(token, body string) (int, time.Duration, error) {
		return timed(http.MethodPost, "/api/v1/leads", token, body)
	}
	workspace, ok := opaqueid.Parse(opaqueid.Workspace, a.WorkspaceID)
	if !ok {
		t.Fatalf("workspace id %q", a.WorkspaceID)
	}
	ctx := context.Background()
	hold, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx) //nolint:errcheck // a no-op once rolled back
	if _, err := hold.Exec(ctx, `INSERT INTO contacts (workspace_id, id, email, created_at, updated_at)
		VALUES ($1, gen_random_uuid(), 'held@attacker.example', now(), now())`, workspace); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var mu sync.Mutex
	attacker := map[int]int{}
	victim := map[int]int{}
	var latency []time.Duration
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, _, err := send(a.Token, `{"contact":{"email":"held@attacker.example"},"source":"web_form"}`)
				if err == nil {
					mu.Lock()
					attacker[status]++
					mu.Unlock()
				}
			}
		})
	}
	// The attacker's creates are waiting for the held email.
	if _, ok, err := dbtest.WaitForLockWaiters(ctx, raw, dbtest.AtLeast(1), 5*time.Second); err != nil || !ok {
		t.Fatalf("no attacker create waits for the held email (%v)", err)
	}
	// The victim sends at a steady pace, as a lead source would.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := range 40 {
		<-tick.C
		status, took, err := send(b.Token, fmt.Sprintf(`{"contact":{"email":"v%d@victim.example"},"source":"web_form"}`, i))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		victim[status]++
		latency = append(latency, took)
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
	slices.Sort(latency)
	p90, worst := latency[len(latency)*9/10], latency[len(latency)-1]
	t.Logf("attacker: %v; victim: %v, p90 %v, max %v", attacker, victim, p90, worst)
	if p90 > 250*time.Millisecond {
		t.Errorf("the victim's p90 single lead create took %v while another tenant's creates waited for a lock, want under 250ms", p90)
	}
	for s := range victim {
		if s >= 500 {
			t.Errorf("the victim got %d", s)
		}
	}
}
