package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/internal/webhook/signature"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
	"github.com/svat/partnerapi/service/webhook/delivery"
)

// received is one delivery a receiver accepted.
type received struct {
	ID, Type, Object string
	Changed          []string
	Status           string
	Body             []byte
}

// receiver is a webhook receiver that verifies every signature, answers
// as answer says (nil: 204), and keeps what it accepted, in order.
type receiver struct {
	*httptest.Server
	t       testing.TB
	secrets []signature.Secret
	mu      sync.Mutex
	got     []received
	calls   int
	answer  func(call int, r received) int
	hang    chan struct{}
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	secrets := rc.secrets
	rc.mu.Unlock()
	if err := signature.Verify(secrets, signature.HeadersFrom(r.Header), body, time.Now(), 5*time.Minute); err != nil {
		rc.t.Errorf("a delivery that does not verify: %v\n%s %s", err, r.Header, body)
		w.WriteHeader(400)
		return
	}
	var ev struct {
		ID, Type string
		Data     struct {
			Object        map[string]any
			ChangedFields []string
		}
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != r.Header.Get("webhook-id") || r.Header.Get("Content-Type") != "application/json" {
		rc.t.Errorf("delivery %s: %v %s", r.Header.Get("webhook-id"), err, body)
	}
	got := received{ID: ev.ID, Type: ev.Type, Changed: ev.Data.ChangedFields, Body: body}
	got.Object, _ = ev.Data.Object["id"].(string)
	got.Status, _ = ev.Data.Object["status"].(string)
	if rc.hang != nil {
		<-rc.hang
	}
	rc.mu.Lock()
	rc.calls++
	call := rc.calls
	answer := rc.answer
	rc.mu.Unlock()
	status := http.StatusNoContent
	if answer != nil {
		status = answer(call, got)
	}
	if status < 300 {
		rc.mu.Lock()
		rc.got = append(rc.got, got)
		rc.mu.Unlock()
	}
	w.WriteHeader(status)
}

func (rc *receiver) accepted() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// harness is a server whose webhook client may reach loopback receivers,
// on a short retry schedule.
func harness(t *testing.T, schedule ...time.Duration) *servertest.Harness {
	t.Helper()
	nets, err := outbound.ParseNetworks("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	if schedule == nil {
		schedule = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
	}
	return servertest.New(t, servertest.Options{Config: func(c *server.Config) {
		c.WebhookAllowedNetworks = nets
		c.WebhookSchedule = schedule
		c.WebhookTimeout = 2 * time.Second
	}})
}

// endpoint registers an endpoint of tn's client for url and types straight
// in the table (the management API is tested in service/webhook), at the
// feed position a new endpoint starts from (delivery.Start), and returns
// its id and secret.
func endpoint(t *testing.T, h *servertest.Harness, tn servertest.Tenant, url string, types ...string) (uuid.UUID, string) {
	t.Helper()
	ctx := context.Background()
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	client, _ := opaqueid.Parse(opaqueid.Client, tn.ClientID)
	id, secret := uuid.New(), signature.NewSecret()
	err := h.DB.WithTx(ctx, func(tx db.DBTX) error {
		xid, seq, err := delivery.Start(ctx, tx, ws)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO webhook_endpoints
			(workspace_id, id, client_id, url, event_types, secret, after_xid, after_seq)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, ws, id, client, url, types, secret, xid, seq)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id, secret
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	dbtest.Eventually(t, 30*time.Second, what, cond)
}

func create(t *testing.T, h *servertest.Harness, tok, path, body string) string {
	t.Helper()
	s, _, b := h.Do(http.MethodPost, path, tok, "application/json", body)
	if s != 201 {
		t.Fatalf("create %s: %d %s", body, s, b)
	}
	return servertest.ID(t, b)
}

// TestRetriesKeepTheIDAndRecordsKeepTheirOrder: a receiver that fails the
// first two attempts of every delivery still gets every event, each under
// one webhook-id however often it was sent; ten quick PATCHes of one lead
// arrive in the order they were made, while another lead's events arrive
// meanwhile (not held up behind them).
func TestRetriesKeepTheIDAndRecordsKeepTheirOrder(t *testing.T) {
	t.Parallel()
	h := harness(t)
	tn := h.NewFastTenant("Hooks Order")
	seen := map[string]int{}
	var mu sync.Mutex
	rc := newReceiver(t)
	_, secret := endpoint(t, h, tn, rc.URL, "lead.created", "lead.updated")
	rc.trust(t, secret)
	rc.answer = func(_ int, r received) int {
		mu.Lock()
		defer mu.Unlock()
		seen[r.ID]++
		if seen[r.ID] <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	slow := create(t, h, tn.Token, "/api/v1/leads", `{"contact":{"email":"slow@x.co"},"title":"Slow"}`)
	other := create(t, h, tn.Token, "/api/v1/leads", `{"contact":{"email":"other@x.co"},"title":"Other"}`)
	statuses := []string{"contacted", "qualified", "unqualified", "new"}
	for i := range 10 {
		if s, _, b := h.Do(http.MethodPatch, "/api/v1/leads/"+slow, tn.Token, "application/merge-patch+json",
			fmt.Sprintf(`{"title":"Slow %d","status":%q}`, i, statuses[i%len(statuses)])); s != 200 {
			t.Fatalf("patch %d: %d %s", i, s, b)
		}
	}
	if s, _, b := h.Do(http.MethodPatch, "/api/v1/leads/"+other, tn.Token, "application/merge-patch+json", `{"title":"Other 1"}`); s != 200 {
		t.Fatalf("patch other: %d %s", s, b)
	}
	waitFor(t, "12 events delivered", func() bool { return len(rc.accepted()) == 13 })
	got := rc.accepted()
	var slowTitles []string
	otherAt := -1
	for i, r := range got {
		mu.Lock()
		if seen[r.ID] != 3 {
			t.Errorf("event %s was attempted %d times, want 3 (two failures, then success)", r.ID, seen[r.ID])
		}
		mu.Unlock()
		var ev struct {
			Data struct{ Object struct{ ID, Title string } }
		}
		_ = json.Unmarshal(r.Body, &ev)
		switch ev.Data.Object.ID {
		case slow:
			slowTitles = append(slowTitles, ev.Data.Object.Title)
		case other:
			if r.Type == "lead.updated" {
				otherAt = i
			}
		}
	}
	want := []string{"Slow"}
	for i := range 10 {
		want = append(want, fmt.Sprintf("Slow %d", i))
	}
	if !slices.Equal(slowTitles, want) {
		t.Errorf("one lead's events arrived as %v, want %v", slowTitles, want)
	}
	if otherAt < 0 || otherAt == len(got)-1 && len(slowTitles) > 0 && got[len(got)-2].Object == slow {
		// The other lead's update was made after the ten PATCHes; with
		// records in parallel it must not wait for all ten deliveries.
		t.Logf("the other lead's update arrived at position %d of %d", otherAt, len(got))
	}
	if otherAt > 8 {
		t.Errorf("the other lead's update arrived at position %d of %d: held up behind the first lead's", otherAt, len(got))
	}
}

// newReceiver is a receiver; trust sets the secrets it verifies with,
// once the endpoint exists.
func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) trust(t *testing.T, secrets ...string) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secrets = nil
	for _, s := range secrets {
		sec, err := signature.ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		rc.secrets = append(rc.secrets, sec)
	}
}

// TestNoEndpointRestsTheFanOut: writes to a database with no enabled
// endpoint make about one fan-out a second, not one per write (in make
// bench (i), fifty idle fan-outs a second cost the lead ingest about a
// tenth of its rate). An endpoint another replica adds meanwhile (straight
// into the table: nothing tells this one) gets the next write's event
// within about the rest; a change through this replica ends the rest at
// once.
func TestNoEndpointRestsTheFanOut(t *testing.T) {
	t.Parallel()
	h := harness(t)
	tn := h.NewFastTenant("Hooks Rest")
	eng := h.Server.Webhooks
	create(t, h, tn.Token, "/api/v1/leads", `{"contact":{"email":"first@x.co"}}`)
	waitFor(t, "a first fan-out", func() bool { return eng.FanOuts() > 0 })

	before, start := eng.FanOuts(), time.Now()
	for i := range 20 {
		create(t, h, tn.Token, "/api/v1/leads", fmt.Sprintf(`{"contact":{"email":"rest-%d@x.co"}}`, i))
		time.Sleep(30 * time.Millisecond) // more than minGap: each write's wake would fan out
	}
	ran, allowed := eng.FanOuts()-before, int64(time.Since(start)/time.Second)+2
	if ran > allowed {
		t.Errorf("20 writes with no endpoint ran %d fan-outs in %s, want at most %d (one a second)", ran, time.Since(start).Round(time.Millisecond), allowed)
	}

	rc := newReceiver(t)
	_, secret := endpoint(t, h, tn, rc.URL, "lead.created")
	rc.trust(t, secret)
	added := time.Now()
	id := create(t, h, tn.Token, "/api/v1/leads", `{"contact":{"email":"after@x.co"}}`)
	waitFor(t, "the lead created after the endpoint was added", func() bool {
		for _, r := range rc.accepted() {
			if r.Object == id {
				return true
			}
		}
		return false
	})
	if d := time.Since(added); d > 5*time.Second {
		t.Errorf("the first delivery to an endpoint added elsewhere took %s, want about a second", d.Round(time.Millisecond))
	}

	// A change made through this replica (an endpoint created, updated or
	// replayed) fans out at the next round, rest or not.
	before = eng.FanOuts()
	eng.Changed()
	waitFor(t, "a fan-out after Changed", func() bool { return eng.FanOuts() > before })
}

// TestAnEventAnOlderTransactionHeldBackIsSentSoonAfter: the fan-out moves
// only events below the watermark, the cluster's oldest running
// transaction. A write's wake, while another transaction older than the
// write still runs, fans out nothing; when that transaction ends, nothing
// writes to wake the engine again. The engine looks again about every
// second after a wake whose fan-out moved nothing, so the event goes out
// within a second or two of the end of the transaction that held it, not
// a lease later (the next round an idle engine would make otherwise).
func TestAnEventAnOlderTransactionHeldBackIsSentSoonAfter(t *testing.T) {
	t.Parallel()
	h := harness(t)
	tn := h.NewFastTenant("Hooks Held Back")
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	rc := newReceiver(t)
	_, secret := endpoint(t, h, tn, rc.URL, "contact.created")
	rc.trust(t, secret)
	// A first event delivered: nothing is due after it.
	create(t, h, tn.Token, "/api/v1/contacts", `{"email":"first@x.co"}`)
	waitFor(t, "the first event", func() bool { return len(rc.accepted()) == 1 })

	older, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = older.Rollback(ctx) }()
	if _, err := older.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	before := h.Server.Webhooks.FanOuts()
	id := create(t, h, tn.Token, "/api/v1/contacts", `{"email":"held@x.co"}`)
	// Two fan-outs since: one began after the write committed.
	waitFor(t, "a fan-out after the write", func() bool { return h.Server.Webhooks.FanOuts() > before+1 })
	if n := len(rc.accepted()); n != 1 {
		t.Fatalf("%d events delivered while an older transaction held the watermark, want 1", n)
	}
	if err := older.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	waitFor(t, "the held-back event", func() bool { return len(rc.accepted()) == 2 })
	if got := rc.accepted()[1].Object; got != id {
		t.Errorf("delivered %s, want %s", got, id)
	}
	if d := time.Since(ended); d > 3*time.Second {
		t.Errorf("the held-back event went out %s after the older transaction ended, want within about a second", d.Round(time.Millisecond))
	}
}
