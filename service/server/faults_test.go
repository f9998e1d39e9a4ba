package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// The database's failure modes. Each must be answered 503 with the
// surface's body within 5 s (product.md, "Limits"), never 500 or 504, and
// service must resume by itself. Tests that freeze, crash or exhaust a
// cluster run on a private one (dbtest.NewCluster).

// clusterHarness runs the service on a private cluster, through url when
// given (a proxy in front of it).
func clusterHarness(t *testing.T, c *dbtest.Cluster, through string) *servertest.Harness {
	t.Helper()
	if through == "" {
		through = c.URL
	}
	d, err := db.Open(context.Background(), through)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return servertest.New(t, servertest.Options{DB: d})
}

var faultClient = &http.Client{Timeout: 15 * time.Second}

// post sends a REST POST and returns status, headers and body; a transport
// error is status 0.
func post(h *servertest.Harness, path, token, contentType, body string, headers ...string) (int, http.Header, []byte, time.Duration) {
	req, _ := http.NewRequest(http.MethodPost, h.Public.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	res, err := faultClient.Do(req)
	if err != nil {
		return 0, nil, []byte(err.Error()), time.Since(start)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b, time.Since(start)
}

func newContactBody() string { return fmt.Sprintf(`{"email":"%s@fault.test"}`, uuid.NewString()) }

// assertUnavailable checks all three surfaces: problem+json "unavailable"
// on /api/v1, RFC 6749 "temporarily_unavailable" on /api/oauth/token, and
// Unavailable over Connect, each within 5 s.
func assertUnavailable(t *testing.T, h *servertest.Harness, tn servertest.Tenant) {
	t.Helper()
	// real clock: the 5 s bound on an answer is the subject, under the
	// database's own timeouts (statement, lock, connect), which really
	// elapse.
	const bound = 5 * time.Second

	s, hdr, b, took := post(h, "/api/v1/contacts", tn.Token, "application/json", newContactBody())
	if s != http.StatusServiceUnavailable || took > bound {
		t.Errorf("POST /api/v1/contacts: %d after %v, want 503 within 5 s: %s", s, took, b)
	} else {
		var p struct {
			Code   string `json:"code"`
			Status int    `json:"status"`
		}
		if hdr.Get("Content-Type") != "application/problem+json" || json.Unmarshal(b, &p) != nil ||
			p.Code != "unavailable" || p.Status != 503 || hdr.Get("Retry-After") == "" {
			t.Errorf("POST /api/v1/contacts 503: %s %s (Retry-After %q)", hdr.Get("Content-Type"), b, hdr.Get("Retry-After"))
		}
	}

	// A lead create goes through the shared-commit queue (lead.Writer).
	s, _, b, took = post(h, "/api/v1/leads", tn.Token, "application/json", `{"contact":`+newContactBody()+`}`)
	if s != http.StatusServiceUnavailable || took > bound || !strings.Contains(string(b), `"code":"unavailable"`) {
		t.Errorf("POST /api/v1/leads: %d after %v, want 503 within 5 s: %s", s, took, b)
	}

	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {tn.ClientID}, "client_secret": {tn.ClientSecret}}.Encode()
	s, hdr, b, took = post(h, "/api/oauth/token", "", "application/x-www-form-urlencoded", form)
	if s != http.StatusServiceUnavailable || took > bound {
		t.Errorf("POST /api/oauth/token: %d after %v, want 503 within 5 s: %s", s, took, b)
	} else {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error != "temporarily_unavailable" || hdr.Get("Cache-Control") != "no-store" {
			t.Errorf("POST /api/oauth/token 503: %s", b)
		}
	}

	client := contactv1connect.NewContactServiceClient(faultClient, h.Public.URL)
	req := connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: proto.String(uuid.NewString() + "@fault.test")}})
	req.Header().Set("Authorization", "Bearer "+tn.Token)
	start := time.Now()
	_, err := client.CreateContact(context.Background(), req)
	if took := time.Since(start); took > bound {
		t.Errorf("Connect CreateContact took %v, want under 5 s", took)
	}
	assertConnectError(t, err, connect.CodeUnavailable, "unavailable")
}

// assertResumes waits until creates succeed again.
func assertResumes(t *testing.T, h *servertest.Harness, tn servertest.Tenant) {
	t.Helper()
	var s int
	var b []byte
	if !dbtest.Until(30*time.Second, func() bool {
		s, _, b, _ = post(h, "/api/v1/contacts", tn.Token, "application/json", newContactBody())
		return s != http.StatusServiceUnavailable
	}) || s != http.StatusCreated {
		t.Fatalf("after the fault: %d %s, want 201 (or 503 while it recovers)", s, b)
	}
}

func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// TestDatabaseRefusingConnectionsIs503: PostgreSQL refusing new sessions
// with 57P03 (cannot_connect_now, as while it starts up or recovers from a
// crash; here it is shutting down, which a held session makes last).
func TestDatabaseRefusingConnectionsIs503(t *testing.T) {
	t.Parallel()
	c := dbtest.NewCluster(t)
	h := clusterHarness(t, c, "")
	tn := h.NewTenant("Refused Co")
	ctx := context.Background()
	held, err := pgx.Connect(ctx, c.SuperuserURL())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(ctx)
	// A smart shutdown lets open sessions finish and refuses new ones.
	if err := syscall.Kill(c.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, dbtest.Role); err != nil {
		t.Fatal(err)
	}
	if !dbtest.Until(5*time.Second, func() bool {
		var conn *pgx.Conn
		if conn, err = pgx.Connect(ctx, c.URL); err == nil {
			_ = conn.Close(ctx)
		}
		return sqlstate(err) == "57P03"
	}) {
		t.Fatalf("new sessions are not refused with 57P03: %v", err)
	}
	assertUnavailable(t, h, tn)
}

// TestDatabaseOutOfConnectionsIs503: no connection slot left (53300).
func TestDatabaseOutOfConnectionsIs503(t *testing.T) {
	t.Parallel()
	c := dbtest.NewCluster(t)
	h := clusterHarness(t, c, "")
	tn := h.NewTenant("Crowded Co")
	ctx := context.Background()
	super := c.Super(t)
	// No slot left for the role: what max_connections or the role's limit
	// does when they are all taken.
	if _, err := super.Exec(ctx, "ALTER ROLE "+dbtest.Role+" CONNECTION LIMIT 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, dbtest.Role); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, c.URL); sqlstate(err) != "53300" {
		t.Fatalf("a new session: %v, want 53300 too_many_connections", err)
	}
	assertUnavailable(t, h, tn)
	if _, err := super.Exec(ctx, "ALTER ROLE "+dbtest.Role+" CONNECTION LIMIT -1"); err != nil {
		t.Fatal(err)
	}
	assertResumes(t, h, tn)
}

// TestFrozenDatabaseIs503Within5s: every PostgreSQL process stopped
// (SIGSTOP), as a hung host or a stalled disk would leave it: sessions
// are open and nothing answers.
func TestFrozenDatabaseIs503Within5s(t *testing.T) {
	t.Parallel()
	c := dbtest.NewCluster(t)
	h := clusterHarness(t, c, "")
	tn := h.NewTenant("Frozen Co")
	c.Freeze()
	assertUnavailable(t, h, tn)
	c.Thaw()
	assertResumes(t, h, tn)
}

// TestLockedTableIs503Within5s: a create waiting behind a lock gives up
// within the bound, and its statement is cancelled on the server rather
// than left waiting.
func TestLockedTableIs503Within5s(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.URL(t)
	d, err := db.Open(ctx, u) // the production bounds
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	h := servertest.New(t, servertest.Options{DB: d})
	tn := h.NewTenant("Locked Co")
	raw, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	s, hdr, b, took := post(h, "/api/v1/contacts", tn.Token, "application/json", newContactBody())
	if s != http.StatusServiceUnavailable || took > 5*time.Second || hdr.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(b), `"code":"unavailable"`) {
		t.Fatalf("create behind a lock: %d after %v: %s", s, took, b)
	}
	// The waiting statement was cancelled, not abandoned.
	none := func(waiting int) bool { return waiting == 0 }
	if waiting, ok, err := dbtest.WaitForLockWaiters(ctx, raw, none, 2*time.Second); err != nil {
		t.Fatal(err)
	} else if !ok {
		t.Fatalf("%d statements still wait for the lock after their request was answered", waiting)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	assertResumes(t, h, tn)
}

// TestCommitOutcomeUnknownResolvesOnceWithIdempotencyKey: the connection
// dies after the create committed and before the service heard so. The
// answer is 503 (the outcome is unknown to the service), and a retry with
// the same Idempotency-Key replays the create: one contact, never two.
// The proxy finds the moment by the effect (the row is there), so this
// holds whatever statements the create uses.
func TestCommitOutcomeUnknownResolvesOnceWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	c := dbtest.NewCluster(t)
	p := dbtest.NewProxy(t, c.URL)
	h := clusterHarness(t, c, p.URL)
	tn := h.NewTenant("Unknown Co")
	ctx := context.Background()
	super := c.Super(t)
	email := uuid.NewString() + "@fault.test"
	body := `{"email":"` + email + `","firstName":"Ada"}`
	count := func() int {
		var n int
		if err := super.QueryRow(ctx, "SELECT count(*) FROM contacts WHERE email = $1", email).Scan(&n); err != nil {
			t.Error(err)
		}
		return n
	}
	p.CutWhen(email, func() bool { return count() > 0 })
	s, _, b, _ := post(h, "/api/v1/contacts", tn.Token, "application/json", body, "Idempotency-Key", "unknown-1")
	if p.Cuts() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1 (answer %d %s)", p.Cuts(), s, b)
	}
	if s != http.StatusServiceUnavailable || !strings.Contains(string(b), `"code":"unavailable"`) {
		t.Fatalf("create whose commit answer was lost: %d %s, want 503 unavailable", s, b)
	}
	if n := count(); n != 1 {
		t.Fatalf("contacts after the lost answer: %d, want 1 (it committed)", n)
	}
	var id string
	if err := super.QueryRow(ctx, "SELECT id::text FROM contacts WHERE email = $1", email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// The first attempt's session may linger a moment: 409 until it ends.
	var hdr http.Header
	dbtest.Until(5*time.Second, func() bool {
		s, hdr, b, _ = post(h, "/api/v1/contacts", tn.Token, "application/json", body, "Idempotency-Key", "unknown-1")
		return s != http.StatusConflict
	})
	if s != http.StatusCreated || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d replayed=%q %s, want the stored 201 replayed", s, hdr.Get("Idempotent-Replayed"), b)
	}
	var got struct {
		ID    string `json:"id"`
		Email string `json:"email"`
	}
	mustUnmarshal(t, b, &got)
	if got.Email != email || got.ID != opaqueid.Format(opaqueid.Contact, uuid.MustParse(id)) {
		t.Fatalf("replayed body: %s", b)
	}
	if n := count(); n != 1 {
		t.Fatalf("contacts after the retry: %d, want 1", n)
	}
}

// TestCrashUnderLoadAnswers2xxOr503: a backend is killed while creates
// run, and PostgreSQL restarts every session and recovers. Every answer is
// 201 or 503; every 201 is in the database afterwards; a retry of each 503
// with its Idempotency-Key leaves exactly one contact.
func TestCrashUnderLoadAnswers2xxOr503(t *testing.T) {
	t.Parallel()
	c := dbtest.NewCluster(t)
	h := clusterHarness(t, c, "")
	tn := h.NewFastTenant("Crash Co")
	ctx := context.Background()
	type attempt struct {
		key, email string
		status     int
	}
	var (
		mu       sync.Mutex
		attempts []attempt
		wg       sync.WaitGroup
		acked    atomic.Int64 // creates answered 201 so far
	)
	stop := make(chan struct{})
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(halt) // on a failure below too
	for w := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := attempt{key: fmt.Sprintf("crash-%d-%d", w, i), email: uuid.NewString() + "@fault.test"}
				a.status, _, _, _ = post(h, "/api/v1/contacts", tn.Token, "application/json", `{"email":"`+a.email+`"}`, "Idempotency-Key", a.key)
				if a.status == http.StatusCreated {
					acked.Add(1)
				}
				mu.Lock()
				attempts = append(attempts, a)
				mu.Unlock()
			}
		})
	}
	// The crash comes under load: creates are being acknowledged.
	dbtest.Eventually(t, 30*time.Second, "creates acknowledged before the crash", func() bool { return acked.Load() >= 20 })
	super, err := pgx.Connect(ctx, c.SuperuserURL())
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close(ctx)
	var victim int32
	if err := super.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE usename = $1 AND backend_type = 'client backend' LIMIT 1`,
		dbtest.Role).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(int(victim), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// A crashed backend makes PostgreSQL end every session, this one too,
	// and recover; the load runs on until creates are acknowledged again.
	dbtest.Eventually(t, 10*time.Second, "the crash to end the superuser's session", func() bool { return super.Ping(ctx) != nil })
	before := acked.Load()
	dbtest.Eventually(t, 30*time.Second, "creates acknowledged after the recovery", func() bool { return acked.Load() >= before+20 })
	halt()
	assertResumes(t, h, tn)

	pool := c.Super(t)
	var created, unavailable int
	for _, a := range attempts {
		switch a.status {
		case http.StatusCreated:
			created++
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM contacts WHERE email = $1", a.email).Scan(&n); err != nil || n != 1 {
				t.Errorf("acknowledged contact %s: %d rows, %v; want 1", a.email, n, err)
			}
		case http.StatusServiceUnavailable:
			unavailable++
			s, _, b, _ := post(h, "/api/v1/contacts", tn.Token, "application/json", `{"email":"`+a.email+`"}`, "Idempotency-Key", a.key)
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM contacts WHERE email = $1", a.email).Scan(&n); err != nil || s != http.StatusCreated || n != 1 {
				t.Errorf("retry of a 503: %d %s, %d rows (%v); want 201 and 1 row", s, b, n, err)
			}
		default:
			t.Errorf("answer %d during the crash, want 201 or 503", a.status)
		}
	}
	t.Logf("%d creates: %d acknowledged, %d answered 503", len(attempts), created, unavailable)
	if created == 0 {
		t.Fatal("no create succeeded")
	}
}

// TestFrozenListenerStopsTrustingItsCache: replica B's listening backend
// is stopped (SIGSTOP) while its socket stays open, so B hears nothing and
// knows nothing of it. A revocation through replica A must still hold on
// B: the revoke answers once B can no longer answer from its cache (B's
// own heartbeats stopped coming back), and B accepts the revoked token
// zero times after that. B then reconnects its feed by itself.
func TestFrozenListenerStopsTrustingItsCache(t *testing.T) {
	t.Parallel()
	c := dbtest.NewCluster(t)
	a := clusterHarness(t, c, "")
	b := servertest.New(t, servertest.Options{DB: a.DB})
	tn := a.NewTenant("Half-open Co")
	ctx := context.Background()
	super := c.Super(t)

	// B caches the token.
	for range 2 {
		if s, _, body := b.Do(http.MethodGet, "/api/v1/me", tn.Token, "", ""); s != 200 {
			t.Fatalf("warm B: %d %s", s, body)
		}
	}
	pid := int32(b.Server.Cache.ListenerPID())
	var query string
	if err := super.QueryRow(ctx, "SELECT query FROM pg_stat_activity WHERE pid = $1", pid).Scan(&query); err != nil ||
		!strings.Contains(query, "LISTEN partner_auth") {
		t.Fatalf("B's listener backend %d in pg_stat_activity: %q, %v", pid, query, err)
	}
	if err := syscall.Kill(int(pid), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(int(pid), syscall.SIGCONT) })
	frozen := time.Now()

	start := time.Now()
	s, _, body := a.Do(http.MethodPost, "/api/oauth/revoke", "", "application/x-www-form-urlencoded",
		url.Values{"token": {tn.Token}, "client_id": {tn.ClientID}, "client_secret": {tn.ClientSecret}}.Encode())
	if s != 200 {
		t.Fatalf("revoke on A: %d %s", s, body)
	}
	t.Logf("revoke answered in %v", time.Since(start))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("revoke took %v, want at most the trust window (2 s) and a little", took)
	}

	// real clock: B's trust window (2 s) must really pass while B's
	// listener stays frozen; B is sampled every 5 ms through 4 s of it.
	sample := time.NewTicker(5 * time.Millisecond)
	defer sample.Stop()
	polls, stale, staleAfter2s := 0, 0, 0
	for ; time.Since(start) < 4*time.Second; <-sample.C {
		s, _, _ := b.Do(http.MethodGet, "/api/v1/me", tn.Token, "", "")
		polls++
		if s == 200 {
			stale++
			if time.Since(frozen) > 2*time.Second {
				staleAfter2s++
			}
		} else if s != 401 {
			t.Fatalf("revoked token on B: %d", s)
		}
	}
	t.Logf("%d polls of B after the revoke: %d accepted", polls, stale)
	if stale != 0 || staleAfter2s != 0 {
		t.Fatalf("B accepted the revoked token %d times of %d after the revoke answered (%d after 2 s)", stale, polls, staleAfter2s)
	}

	// B gave the silent session up and proves a new one alive.
	dbtest.Eventually(t, 10*time.Second, "B to reconnect its feed while the old backend stays frozen", func() bool {
		return b.Server.Cache.Live() && b.Server.Cache.ListenerPID() != uint32(pid)
	})
	tok := b.Token(tn.ClientID, tn.ClientSecret, "")
	if s, _, _ := b.Do(http.MethodGet, "/api/v1/me", tok, "", ""); s != 200 {
		t.Fatalf("new token on B: %d", s)
	}
}

// TestDatabaseGoneIs503: PostgreSQL is not there at all (stopped: its
// socket is gone and every session ended).
func TestDatabaseGoneIs503(t *testing.T) {
	t.Parallel()
	c := dbtest.NewCluster(t)
	h := clusterHarness(t, c, "")
	tn := h.NewTenant("Gone Co")
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertUnavailable(t, h, tn)
}

// TestListenerBackoffResets: the listening session is killed again and
// again, each time after it had been proven alive; the cache must be back
// within moments every time, not after a backoff that kept doubling.
func TestListenerBackoffResets(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	raw := dbtest.Raw(t, h.DB)
	ctx := context.Background()
	for i := range 7 {
		pid := h.Server.Cache.ListenerPID()
		if _, err := raw.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(pid)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		dbtest.Eventually(t, 5*time.Second, fmt.Sprintf("the cache back after drop %d", i+1), func() bool {
			return h.Server.Cache.ListenerPID() != pid && h.Server.Cache.Live()
		})
		// real clock: the listener's backoff is real time, and so is what
		// is measured here.
		t.Logf("drop %d: back after %v", i+1, time.Since(start))
		// A backoff that kept doubling would be 1.6 s by the fifth drop.
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Errorf("drop %d: the cache came back after %v, want under 1.5 s", i+1, took)
		}
	}
}
