package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// TestOneTenantsBatchesDoNotStarveAnother runs tenant A's 100-contact
// batches with the same new emails in opposite orders (which deadlocked
// when a batch inserted in input order, and held the shared pool while
// PostgreSQL found the deadlock) against tenant B's reads and lead creates,
// on the production pool and timeouts: B gets no 5xx, and its p99 stays
// under 250 ms, because A's requests lock in one order, bound their lock
// waits, and hold at most A's share of the pool.
func TestOneTenantsBatchesDoNotStarveAnother(t *testing.T) {
	h, raw := productionHarness(t)
	a := h.NewFastTenant("attacker")
	b := h.NewFastTenant("victim")
	send := timedSender(h)
	batch := func(round, pair int, reverse bool) string {
		items := make([]string, 100)
		for i := range items {
			n := i
			if reverse {
				n = 99 - i
			}
			items[i] = fmt.Sprintf(`{"email":"r%d-p%d-%d@attacker.example"}`, round, pair, n)
		}
		return `{"contacts":[` + strings.Join(items, ",") + `]}`
	}

	const rounds, pairs = 4, 8
	stop := make(chan struct{})
	var mu sync.Mutex
	attacker := map[int]int{}
	var victimStatus []int
	var victimLatency []time.Duration
	var errs []error
	record := func(victim bool, status int, took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, err)
		case victim:
			victimStatus = append(victimStatus, status)
			victimLatency = append(victimLatency, took)
		default:
			attacker[status]++
		}
	}
	workspace, ok := opaqueid.Parse(opaqueid.Workspace, a.WorkspaceID)
	if !ok {
		t.Fatalf("workspace id %q", a.WorkspaceID)
	}
	var attack, victim sync.WaitGroup
	attack.Go(func() {
		ctx := context.Background()
		for r := range rounds {
			// Each round, another transaction holds the middle email of
			// every pair until the pair's batches wait for it, so that
			// the two batches of a pair surely meet: in input order, one
			// holds the emails below it and the other those above, and
			// they deadlock as soon as it lets go.
			hold, err := raw.Begin(ctx)
			if err != nil {
				record(false, 0, 0, err)
				return
			}
			defer hold.Rollback(ctx) //nolint:errcheck // a no-op once rolled back
			for p := range pairs {
				if _, err := hold.Exec(ctx, `INSERT INTO contacts (workspace_id, id, email, created_at, updated_at)
					VALUES ($1, gen_random_uuid(), $2, now(), now())`, workspace, fmt.Sprintf("r%d-p%d-50@attacker.example", r, p)); err != nil {
					record(false, 0, 0, err)
					return
				}
			}
			var round sync.WaitGroup
			for p := range pairs {
				for _, reverse := range []bool{false, true} {
					round.Go(func() {
						status, took, err := send(http.MethodPost, "/api/v1/contacts/batch", a.Token, batch(r, p, reverse))
						record(false, status, took, err)
					})
				}
			}
			// A tenant's share may keep its batches from ever getting
			// that far, which is what this test shows: wait a while.
			if _, _, err := dbtest.WaitForLockWaiters(ctx, raw, dbtest.AtLeast(2*pairs), 1500*time.Millisecond); err != nil {
				record(false, 0, 0, err)
			}
			if err := hold.Rollback(ctx); err != nil {
				record(false, 0, 0, err)
			}
			round.Wait()
		}
	})
	// The victim sends at a steady pace, as a dashboard and a lead source
	// would, so its answers sample the whole attack rather than its gaps.
	victim.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			status, took, err := send(http.MethodGet, "/api/v1/contacts?limit=10", b.Token, "")
			record(true, status, took, err)
		}
	})
	victim.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			body := fmt.Sprintf(`{"contact":{"email":"lead%d@victim.example"},"source":"web_form"}`, i)
			status, took, err := send(http.MethodPost, "/api/v1/leads", b.Token, body)
			record(true, status, took, err)
		}
	})
	attack.Wait()
	close(stop)
	victim.Wait()

	if len(errs) > 0 {
		t.Fatalf("transport errors: %v", errs)
	}
	var fives int
	for _, s := range victimStatus {
		if s >= 500 {
			fives++
		}
	}
	slices.Sort(victimLatency)
	if len(victimLatency) == 0 {
		t.Fatal("the victim sent nothing")
	}
	p50 := victimLatency[len(victimLatency)/2]
	p99 := victimLatency[len(victimLatency)*99/100]
	t.Logf("attacker answers by status: %v; victim: %d requests, %d answered 5xx, p50 %v, p99 %v, max %v",
		attacker, len(victimStatus), fives, p50, p99, victimLatency[len(victimLatency)-1])
	if attacker[http.StatusOK] == 0 {
		t.Errorf("no attacker batch succeeded (%v): the test no longer loads the database", attacker)
	}
	if fives > 0 {
		t.Errorf("the victim got %d answers of 5xx of %d", fives, len(victimStatus))
	}
	if p99 > 250*time.Millisecond {
		t.Errorf("the victim's p99 is %v, want under 250ms", p99)
	}
}

// productionHarness runs the service on the production pool (8
// connections) and timeouts, which the tenant tests are about, with a raw
// pool on the same database for what a test does behind the service's
// back (holding a row, counting lock waiters).
func productionHarness(t *testing.T) (*servertest.Harness, *pgxpool.Pool) {
	t.Helper()
	url := dbtest.URL(t)
	d, err := db.OpenConfig(context.Background(), db.Config{URL: url, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	raw, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	h := servertest.New(t, servertest.Options{DB: d, Config: func(c *server.Config) {
		c.RequestTimeout = server.DefaultRequestTimeout
	}})
	return h, raw
}

// timedSender returns a function that sends one request with a bearer
// token (and a JSON body, when given) from any goroutine, and answers its
// status and how long it took.
func timedSender(h *servertest.Harness) func(method, path, token, body string) (int, time.Duration, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	return func(method, path, token, body string) (int, time.Duration, error) {
		req, err := http.NewRequest(method, h.Public.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		res.Body.Close()
		return res.StatusCode, time.Since(start), nil
	}
}
