package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/webhook/signature"
)

// killTimeout is the replicas' PARTNER_WEBHOOK_TIMEOUT: a delivery's lease
// is this plus 5 s, after which another replica may make it again.
const killTimeout = 2 * time.Second

// hookEnv is what both replicas of a webhook test run with: a receiver
// on loopback allowed, a short attempt timeout and retry schedule.
func hookEnv(databaseURL string) []string {
	return []string{"DATABASE_URL=" + databaseURL, "PARTNER_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8",
		"PARTNER_WEBHOOK_TIMEOUT=" + killTimeout.String(), "PARTNER_WEBHOOK_RETRY_SCHEDULE=1s,1s,1s,1s,1s,1s,1s,1s"}
}

// killReceiver verifies every delivery's signature and records the
// webhook-id of each it answers 204. While holding, it answers nothing:
// requests wait (their number in held) until release, or until the
// replica that sent them goes away.
type killReceiver struct {
	srv     *httptest.Server
	secret  []signature.Secret
	mu      sync.Mutex
	got     map[string]int
	held    int
	bad     []string
	hold    chan struct{}
	release sync.Once
}

func newKillReceiver(t *testing.T, holding bool) *killReceiver {
	r := &killReceiver{got: map[string]int{}, hold: make(chan struct{})}
	if !holding {
		r.unhold()
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		r.mu.Lock()
		secrets := r.secret
		r.mu.Unlock()
		if err == nil {
			err = signature.Verify(secrets, signature.HeadersFrom(req.Header), body, time.Now(), 5*time.Minute)
		}
		if err != nil {
			r.mu.Lock()
			r.bad = append(r.bad, err.Error())
			r.mu.Unlock()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.hold:
		default:
			r.mu.Lock()
			r.held++
			r.mu.Unlock()
			select {
			case <-r.hold:
			case <-req.Context().Done():
				// The replica died with this request in flight: it never
				// learns of an answer.
				return
			}
		}
		r.mu.Lock()
		r.got[req.Header.Get("webhook-id")]++
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { r.unhold(); r.srv.Close() })
	return r
}

func (r *killReceiver) unhold() { r.release.Do(func() { close(r.hold) }) }

func (r *killReceiver) heldNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// missing returns the ids not received yet.
func (r *killReceiver) missing(ids []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, id := range ids {
		if r.got[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// hookTenant makes a workspace and a client with the scopes to create
// leads, read them and manage webhooks, and returns a token for it.
func hookTenant(t *testing.T, bin string, d *daemon) string {
	t.Helper()
	ws := cli(t, bin, d, "", "workspace", "create", "--name", "Hooks Co")["id"].(string)
	m := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "ops@hooks.test", "--settings-access")["id"].(string)
	cl := cli(t, bin, d, "", "client", "create", "--workspace", ws, "--member", m, "--name", "hooks",
		"--scopes", "contacts:read contacts:write leads:read leads:write webhooks:read webhooks:write")
	s, tok := token(t, d, cl["clientId"].(string), cl["clientSecret"].(string))
	if s != http.StatusOK {
		t.Fatalf("token: %d", s)
	}
	return tok
}

// hookCall sends a JSON request to a replica and returns the status and body.
func hookCall(t *testing.T, d *daemon, tok, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+d.public+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// hookEndpoint creates an endpoint for lead.created and contact.created
// through the public API and gives the receiver its secret.
func hookEndpoint(t *testing.T, d *daemon, tok string, r *killReceiver) {
	t.Helper()
	s, b := hookCall(t, d, tok, http.MethodPost, "/api/v1/webhook-endpoints",
		`{"url":"`+r.srv.URL+`/hook","eventTypes":["lead.created","contact.created"]}`)
	var ep struct{ Secret string }
	if s != http.StatusCreated || json.Unmarshal(b, &ep) != nil || ep.Secret == "" {
		t.Fatalf("create webhook endpoint: %d %s", s, b)
	}
	r.mu.Lock()
	r.secret = []signature.Secret{signature.MustParseSecret(ep.Secret)}
	r.mu.Unlock()
}

// eventIDs are the webhook-ids of every event in the database.
func eventIDs(t *testing.T, c *dbtest.Cluster) []string {
	t.Helper()
	rows, err := c.Super(t).Query(context.Background(), "SELECT id FROM events ORDER BY change_xid, seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, opaqueid.Format(opaqueid.Event, id))
	}
	return out
}

// TestWebhookReplicaKilledMidDeliveryLosesNothing: replica A holds
// deliveries in flight (the receiver does not answer) when it is killed
// with SIGKILL; replica B, on the same database, makes them again once
// their leases (PARTNER_WEBHOOK_TIMEOUT + 5 s) run out: every event is
// received, within about a lease, each with a valid signature.
func TestWebhookReplicaKilledMidDeliveryLosesNothing(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	c := dbtest.NewCluster(t)
	a := serveWith(t, bin, hookEnv(c.URL)...)
	tok := hookTenant(t, bin, a)
	rcv := newKillReceiver(t, true)
	hookEndpoint(t, a, tok, rcv)
	const leads = 12
	for i := range leads {
		if s, b := hookCall(t, a, tok, http.MethodPost, "/api/v1/leads",
			fmt.Sprintf(`{"contact":{"email":"kill-%d@hooks.test"},"source":"web_form"}`, i)); s != http.StatusCreated {
			t.Fatalf("create lead: %d %s", s, b)
		}
	}
	// A holds as many requests as one endpoint may have in flight
	// (PARTNER_WEBHOOK_CONCURRENCY, 8).
	dbtest.Eventually(t, 30*time.Second, "8 deliveries held on replica A", func() bool { return rcv.heldNow() >= 8 })
	b := serveWith(t, bin, hookEnv(c.URL)...)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	killed := time.Now()
	rcv.unhold()

	ids := eventIDs(t, c)
	if len(ids) != 2*leads {
		t.Fatalf("%d events for %d leads with new contacts; want %d", len(ids), leads, 2*leads)
	}
	lease := killTimeout + 5*time.Second
	if !dbtest.Until(lease+20*time.Second, func() bool { return len(rcv.missing(ids)) == 0 }) {
		t.Fatalf("%d of %d events never received after replica A was killed: %v\nreplica B:\n%s",
			len(rcv.missing(ids)), len(ids), rcv.missing(ids), tailLog(b.log.String()))
	}
	// The held deliveries waited for their leases to run out, the rest
	// only for their turn: all within about a lease of the kill.
	took := time.Since(killed)
	t.Logf("every event received %v after the kill (lease %v)", took.Round(time.Millisecond), lease)
	if took > lease+10*time.Second {
		t.Errorf("the last event arrived %v after the kill; want within about the lease (%v)", took, lease)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.bad) > 0 {
		t.Errorf("%d deliveries failed verification: %v", len(rcv.bad), rcv.bad[0])
	}
	for id, n := range rcv.got {
		if n > 2 {
			t.Errorf("event %s received %d times; a kill repeats a delivery at most once here", id, n)
		}
	}
}

// TestWebhookReplicasShareABurst: two replicas on one database deliver a
// burst written through both without doing each other's work: every
// event's delivery is attempted once (webhook_attempts) and received
// once.
func TestWebhookReplicasShareABurst(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	c := dbtest.NewCluster(t)
	a := serveWith(t, bin, hookEnv(c.URL)...)
	b := serveWith(t, bin, hookEnv(c.URL)...)
	tok := hookTenant(t, bin, a)
	rcv := newKillReceiver(t, false)
	hookEndpoint(t, a, tok, rcv)
	const leads = 100
	var wg sync.WaitGroup
	errs := make(chan string, leads)
	for i := range leads {
		d := []*daemon{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, "http://"+d.public+"/api/v1/leads",
				strings.NewReader(fmt.Sprintf(`{"contact":{"email":"burst-%d@hooks.test"},"source":"web_form"}`, i)))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				errs <- fmt.Sprintf("create lead: %d", res.StatusCode)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	ids := eventIDs(t, c)
	if len(ids) != 2*leads {
		t.Fatalf("%d events for %d leads with new contacts; want %d", len(ids), leads, 2*leads)
	}
	if !dbtest.Until(60*time.Second, func() bool { return len(rcv.missing(ids)) == 0 }) {
		t.Fatalf("%d of %d events not received", len(rcv.missing(ids)), len(ids))
	}
	var attempts, events, repeated int
	if err := c.Super(t).QueryRow(context.Background(), `SELECT count(*), count(DISTINCT event_id),
		(SELECT count(*) FROM (SELECT event_id FROM webhook_attempts GROUP BY event_id HAVING count(*) > 1) r)
		FROM webhook_attempts`).Scan(&attempts, &events, &repeated); err != nil {
		t.Fatal(err)
	}
	if attempts != 2*leads || events != 2*leads || repeated != 0 {
		t.Errorf("webhook_attempts: %d attempts of %d events, %d events attempted more than once; want %d, %d, 0",
			attempts, events, repeated, 2*leads, 2*leads)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for id, n := range rcv.got {
		if n != 1 {
			t.Errorf("event %s received %d times; want once", id, n)
		}
	}
	if len(rcv.bad) > 0 {
		t.Errorf("%d deliveries failed verification: %v", len(rcv.bad), rcv.bad[0])
	}
}

// tailLog is the end of a replica's log, for a failure message.
func tailLog(s string) string {
	if len(s) > 3000 {
		return s[len(s)-3000:]
	}
	return s
}
