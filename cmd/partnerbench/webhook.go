package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/pgserver"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/eventtype"
	"github.com/svat/partnerapi/internal/webhook/signature"
)

// The webhook scenarios' flags (docs/performance.md, "Webhooks (issue 22)").
var (
	hookEndpoints = flag.Int("webhook-endpoints", 8, "endpoints the deliveries/s scenario drains a backlog to (8 at the default concurrency of 8 fill the engine's 64 workers)")
	hookPerEP     = flag.Int("webhook-concurrency", 8, "PARTNER_WEBHOOK_CONCURRENCY of the webhook scenarios' server")
	hookRate      = flag.Int("webhook-rate", 50, "lead creates a second of the commit-to-first-attempt scenario")
	hookSQL       = flag.String("webhook-sql", "", "a file of SQL run on the webhook scenarios' database after its migrations: to try a change of the delivery SQL")
	hookOldBin    = flag.String("events-baseline-server", "", "a partnerapi binary built at events-baseline-rev already (skips the build)")
	hookOldRev    = flag.String("events-baseline-rev", "a1529b5", "the commit before the event feed, built and measured for the ingest line; empty: skip")
)

// Lines of the webhook scenarios (issue 22).
const (
	minDeliveries = 2000.0
	maxFirstP99   = time.Second
	minIngest     = 0.9
)

// hookScenarioNames are the names -only matches.
var hookScenarioNames = []string{"(g) webhook deliveries/s", "(h) commit to first attempt", "(i) lead ingest, feed and an endpoint on"}

// wantHooks says whether -only selects any webhook scenario.
func wantHooks(only string) bool {
	for _, n := range hookScenarioNames {
		if only == "" || strings.Contains(n, only) {
			return true
		}
	}
	return false
}

// hookBench is the state of the webhook scenarios: a database of their
// own in the run's cluster (the main server's engine must not see their
// endpoints), a `partnerapi serve` on it that may reach loopback
// (PARTNER_WEBHOOK_ALLOWED_NETWORKS), the receiver, one tenant.
type hookBench struct {
	c      config
	pg     *pgserver.Server
	pool   *pgxpool.Pool
	srv    *serverProc
	rcv    *hookReceiver
	client *http.Client
	token  string
	ws     uuid.UUID
	// seq makes emails and idempotency keys unique across scenarios.
	seq atomic.Int64
}

// runWebhookScenarios measures deliveries per second, commit to first
// attempt and lead ingest with the feed and an endpoint on, and returns
// the lines. pg is the run's cluster, raw a superuser pool on it.
func runWebhookScenarios(ctx context.Context, c config, pg *pgserver.Server, raw *pgxpool.Pool) ([]benchLine, error) {
	if !wantHooks(c.only) {
		return nil, nil
	}
	dbURL, err := newDatabase(ctx, raw, pg.URL, "bench_webhooks", true)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if *hookSQL != "" {
		sql, err := os.ReadFile(*hookSQL)
		if err != nil {
			return nil, err
		}
		if _, err := pool.Exec(ctx, string(sql)); err != nil {
			return nil, fmt.Errorf("-webhook-sql: %w", err)
		}
		fmt.Printf("ran %s on the webhook scenarios' database\n", *hookSQL)
	}
	rcv, err := newHookReceiver()
	if err != nil {
		return nil, err
	}
	defer rcv.close()
	env := []string{"PARTNER_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8", "PARTNER_WEBHOOK_CONCURRENCY=" + strconv.Itoa(*hookPerEP)}
	if c.profileDir != "" {
		env = append(env, "PARTNER_PPROF=1")
	}
	srv, err := startServer(ctx, c.serverBin, dbURL, env...)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	tr := &http.Transport{MaxIdleConnsPerHost: c.concurrency * 2, MaxConnsPerHost: c.concurrency * 2, DisableCompression: true}
	b := &hookBench{c: c, pg: pg, pool: pool, srv: srv, rcv: rcv, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	t, err := makeTenant(ctx, srv, append(slices.Clip(writeScopes), "webhooks:read", "webhooks:write"))
	if err != nil {
		return nil, err
	}
	b.ws, b.token = t.ws, t.token

	var lines []benchLine
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	defer tw.Flush()
	fmt.Fprintln(tw, "\nwebhook scenario\tmeasured\tbaseline\tbaseline figure\tratio\t")

	// (h) first, on an empty delivery table; then (g), whose backlog goes
	// with its endpoints; (i) last: the backlog its endpoint leaves (its
	// deleted deliveries wait for a vacuum) would slow the others.
	for _, sc := range []struct {
		name string
		run  func() ([]benchLine, error)
	}{
		{hookScenarioNames[1], func() ([]benchLine, error) { return b.firstAttempt(ctx, tw) }},
		{hookScenarioNames[0], func() ([]benchLine, error) { return b.throughput(ctx, tw) }},
		{hookScenarioNames[2], func() ([]benchLine, error) { return b.ingest(ctx, pg, raw, tw) }},
	} {
		if !strings.Contains(sc.name, c.only) {
			continue
		}
		fmt.Printf("running %s …\n", sc.name)
		l, err := sc.run()
		if err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", sc.name, err, tailString(srv.log.String()))
		}
		lines = append(lines, l...)
	}
	if n := rcv.bad.Load(); n > 0 {
		lines = append(lines, benchLine{"webhook deliveries that failed verification", strconv.FormatInt(n, 10), "0", false})
	}
	return lines, nil
}

// newDatabase creates a database in the cluster and returns its URL;
// migrate runs this tree's migrations on it.
func newDatabase(ctx context.Context, raw *pgxpool.Pool, clusterURL, name string, migrate bool) (string, error) {
	if _, err := raw.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(clusterURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	if !migrate {
		return u.String(), nil
	}
	d, err := db.Open(ctx, u.String())
	if err != nil {
		return "", err
	}
	defer d.Close()
	if _, err := db.Migrate(ctx, d); err != nil {
		return "", fmt.Errorf("migrate %s: %w", name, err)
	}
	return u.String(), nil
}

// apiTenant is a workspace with an API client: its Basic credentials
// and a token.
type apiTenant struct {
	ws           uuid.UUID
	basic, token string
}

// makeTenant makes a workspace, a member and an API client with scopes
// (and the bench's own high rates) through srv's admin API, and a token.
func makeTenant(ctx context.Context, srv *serverProc, scopes []string) (apiTenant, error) {
	admin := adminv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+srv.admin)
	ws, err := admin.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "Bench"}))
	if err != nil {
		return apiTenant{}, err
	}
	m, err := admin.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: ws.Msg.GetId(), Email: "bench@x.co", SettingsAccess: true}))
	if err != nil {
		return apiTenant{}, err
	}
	cl, err := admin.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{WorkspaceId: ws.Msg.GetId(), MemberId: m.Msg.GetId(),
		Name: "bench", Scopes: scopes, ReadRate: &fastRate, WriteRate: &fastRate}))
	if err != nil {
		return apiTenant{}, err
	}
	basic := "Basic " + basicAuth(cl.Msg.GetClientId(), cl.Msg.GetClientSecret())
	token, err := getToken(srv.base, basic)
	if err != nil {
		return apiTenant{}, err
	}
	id, _ := opaqueid.Parse(opaqueid.Workspace, ws.Msg.GetId())
	return apiTenant{ws: id, basic: basic, token: token}, nil
}

// call sends a JSON request with the bench token and returns the status
// and body.
// deleteEndpoint deletes an endpoint as a client would: a 503 (its
// deliveries' rows held by the engine past the request's lock timeout) is
// retried, a few times, a second apart.
func (b *hookBench) deleteEndpoint(ctx context.Context, id string) (int, []byte, error) {
	for i := 0; ; i++ {
		s, out, err := b.call(ctx, http.MethodDelete, "/api/v1/webhook-endpoints/"+id, "")
		if err != nil || s != http.StatusServiceUnavailable || i == 4 {
			return s, out, err
		}
		select {
		case <-ctx.Done():
			return s, out, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (b *hookBench) call(ctx context.Context, method, path, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.srv.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := b.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, out, err
}

// endpoint creates a webhook endpoint named name (its receiver path) for
// every event type through POST /api/v1/webhook-endpoints and gives the
// receiver its secret; it returns the endpoint's id.
func (b *hookBench) endpoint(ctx context.Context, name string) (string, error) {
	types, _ := json.Marshal(eventtype.Names())
	s, body, err := b.call(ctx, http.MethodPost, "/api/v1/webhook-endpoints", fmt.Sprintf(`{"url":%q,"eventTypes":%s}`, b.rcv.url(name), types))
	if err != nil {
		return "", err
	}
	var ep struct{ ID, Secret string }
	if s != http.StatusCreated || json.Unmarshal(body, &ep) != nil || ep.Secret == "" {
		return "", fmt.Errorf("create webhook endpoint: %d %s", s, body)
	}
	return ep.ID, b.rcv.setSecret(name, ep.Secret)
}

// setStatus enables or disables endpoints (a merge patch).
func (b *hookBench) setStatus(ctx context.Context, status string, ids ...string) error {
	for _, id := range ids {
		s, body, err := b.call(ctx, http.MethodPatch, "/api/v1/webhook-endpoints/"+id, `{"status":"`+status+`"}`)
		if err != nil {
			return err
		}
		if s != http.StatusOK {
			return fmt.Errorf("patch webhook endpoint %s: %d %s", status, s, body)
		}
	}
	return nil
}

// events counts the workspace's events.
func (b *hookBench) events(ctx context.Context) (int64, error) {
	var n int64
	err := b.pool.QueryRow(ctx, "SELECT count(*) FROM events WHERE workspace_id = $1", b.ws).Scan(&n)
	return n, err
}

// leadRequest is a single create like scenario (e)'s: an inline contact
// (a new one when fresh, else one of 1,000 known emails), a unique
// Idempotency-Key.
func leadRequest(base, token string, seq *atomic.Int64, fresh bool) request {
	return func(int64) (*http.Request, error) {
		i := seq.Add(1)
		email := i % 1000
		if fresh {
			email = i
		}
		body := fmt.Sprintf(`{"contact":{"email":"lead-%d@bench.test","firstName":"Lee"},"source":"web_form","value":{"amount":1000,"currency":"USD"}}`, email)
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/leads", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "hook-"+strconv.FormatInt(i, 10)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		return req, nil
	}
}

// ingest is scenario (i): scenario (e)'s lead creates with the feed on
// and one endpoint receiving every event, against the same with no
// endpoint, and against the commit before the feed (events-baseline-rev)
// when it builds.
func (b *hookBench) ingest(ctx context.Context, pg *pgserver.Server, raw *pgxpool.Pool, tw io.Writer) ([]benchLine, error) {
	// The line compares the feed on with no endpoint (none) against the
	// commit before the feed (old), both servers up on databases of their
	// own, measured in turns (abTurns): a single pair measured one after
	// the other moved by 0.8-1.05 between runs.
	var oldErr error
	var oldSrv *ownServer
	if *hookOldRev != "" {
		if oldSrv, oldErr = startOwn(ctx, pg, raw, *hookOldBin, *hookOldRev, "bench_before_feed", b.c.profileDir != "", writeScopes); oldErr != nil {
			fmt.Fprintf(os.Stderr, "ingest at %s (skipped): %v\n", *hookOldRev, oldErr)
		} else {
			defer oldSrv.stop()
		}
	}
	t := abTurns{client: b.client, concurrency: b.c.concurrency, turns: ingestTurns, warm: ingestWarm, d: ingestTurn,
		want: http.StatusCreated, perRequest: 1, pg: b.pg, profileDir: b.c.profileDir}
	oldSide := abSide{profile: "webhook-i-before-feed"}
	if oldSrv != nil {
		oldSide.srv, oldSide.mk = oldSrv.srv, leadRequest(oldSrv.srv.base, oldSrv.tenant.token, &oldSrv.seq, false)
	}
	b.resetStatements(ctx)
	ab, err := t.run(ctx, oldSide, abSide{srv: b.srv, mk: leadRequest(b.srv.base, b.token, &b.seq, false), profile: "webhook-i-none"})
	if err != nil {
		return nil, err
	}
	old, none := ab.ref, ab.cur
	if len(ab.ratios) > 0 {
		fmt.Print(ab.describe("(i) lead ingest, feed on, no endpoint, vs "+*hookOldRev, *hookOldRev, "feed on", "leads/s"))
	}
	cpuOf := func(c cpuSplit, n int64) string {
		s, p := cpuPerRequest(c, n)
		return fmt.Sprintf("CPU µs/lead: server %.0f, postgres %.0f", s, p)
	}
	oldCPU, noneCPU := cpuOf(ab.refCPU, old.all), cpuOf(ab.curCPU, none.all)
	b.topStatements(ctx)
	id, err := b.endpoint(ctx, "ingest")
	if err != nil {
		return nil, err
	}
	b.resetStatements(ctx)
	stop := b.profile("webhook-i", ingestWarm, ingestTurn-time.Second)
	c0 := cpuNow(b.srv.pid(), 0, b.pg)
	on, err := load(ctx, b.client, b.c.concurrency, ingestWarm, ingestTurn, http.StatusCreated, leadRequest(b.srv.base, b.token, &b.seq, false))
	onCPU := cpuOf(cpuNow(b.srv.pid(), 0, b.pg).sub(c0), on.all)
	stop()
	if err != nil {
		return nil, err
	}
	b.topStatements(ctx)
	// What the engine had not sent yet when the ingest stopped; the
	// endpoint goes (with its deliveries) so that the next scenarios start
	// from none pending.
	var backlog int64
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'").Scan(&backlog); err != nil {
		return nil, err
	}
	var sent int64
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM webhook_attempts WHERE status = 'succeeded'").Scan(&sent); err != nil {
		return nil, err
	}
	if s, out, err := b.deleteEndpoint(ctx, id); err != nil || s != http.StatusNoContent {
		return nil, fmt.Errorf("delete webhook endpoint: %d %s %v", s, out, err)
	}
	fmt.Fprintf(tw, "%s\t%d delivered, %d pending at the end\t-\t-\t-\t\n", "(i) deliveries during the ingest", sent, backlog)
	name := hookScenarioNames[2]
	fmt.Fprintf(tw, "%s\t%.0f leads/s, p99 %s (%s)\tno endpoint (%s)\t%.0f leads/s\t%.2f\t\n", name, on.rps, ms(on.p99), onCPU, noneCPU, none.rps, on.rps/none.rps)
	// The line is the feed's cost to the writes (issue 22): the feed on
	// against the commit before it. With an endpoint on, the deliveries
	// share the same two cores with the writes (each costs about half a
	// lead's CPU); that figure is shown, not held to the line.
	var lines []benchLine
	if oldErr == nil && old.rps > 0 {
		fmt.Fprintf(tw, "%s\t%.0f leads/s\t%s, no feed (%s)\t%.0f leads/s\t%.2f\t\n", "(i) lead ingest, feed on, no endpoint (median of the turns' ratios)", none.rps, *hookOldRev, oldCPU, old.rps, ab.median)
		fmt.Fprintf(tw, "%s\t%.0f leads/s\t%s, no feed\t%.0f leads/s\t%.2f\t\n", name, on.rps, *hookOldRev, old.rps, on.rps/old.rps)
		lines = append(lines, benchLine{"(i) ingest, feed on vs " + *hookOldRev + " (no feed)", fmt.Sprintf("%.2fx", ab.median), fmt.Sprintf("≥ %.1fx", minIngest), ab.median >= minIngest})
	}
	if on.errors+none.errors+old.errors > 0 {
		lines = append(lines, benchLine{"(i) errors", strconv.FormatInt(on.errors+none.errors+old.errors, 10), "0", false})
	}
	return lines, nil
}

// ingestTurns is how many times (i) measures each of the two servers
// of its line, in turns, each time ingestWarm and then ingestTurn. Many
// short turns rather than a few long ones: single turns of one server
// move by ±0.2 on this shared machine (another tenant's work, a
// checkpoint, an autovacuum), the median of nine pairs held better than
// that of five, and that of 21 two-second pairs better than that of nine
// five-second ones, in about the same time in all.
const (
	ingestTurns = 21
	ingestWarm  = 500 * time.Millisecond
	ingestTurn  = 2 * time.Second
)

// writeScopes are the scopes of a tenant that writes leads, as the main
// server's bench client has.
var writeScopes = []string{"contacts:read", "contacts:write", "leads:read", "leads:write"}

// ownServer is a partnerapi serve on a database of its own, with a
// tenant.
type ownServer struct {
	srv    *serverProc
	dbURL  string
	tenant apiTenant
	seq    atomic.Int64
	clean  func()
}

func (o *ownServer) stop() { o.srv.stop(); o.clean() }

// startOwn starts bin on a new database dbName in the cluster, which the
// binary migrates itself (an older binary on a database this tree's
// migrations made would not be the older release), and makes a tenant
// with scopes through its admin API. With bin "", it first builds the
// partnerapi binary of rev (git archive, go build; nothing in the working
// tree changes). profile turns on its /debug/pprof.
func startOwn(ctx context.Context, pg *pgserver.Server, raw *pgxpool.Pool, bin, rev, dbName string, profile bool, scopes []string) (*ownServer, error) {
	clean := func() {}
	if bin == "" {
		dir, err := os.MkdirTemp("", "partnerbench-old-")
		if err != nil {
			return nil, err
		}
		clean = func() { os.RemoveAll(dir) }
		if bin, err = buildAt(ctx, rev, dir); err != nil {
			clean()
			return nil, err
		}
	}
	dbURL, err := newDatabase(ctx, raw, pg.URL, dbName, false)
	if err != nil {
		clean()
		return nil, err
	}
	var env []string
	if profile {
		env = append(env, "PARTNER_PPROF=1")
	}
	srv, err := startServer(ctx, bin, dbURL, env...)
	if err != nil {
		clean()
		return nil, err
	}
	t, err := makeTenant(ctx, srv, scopes)
	if err != nil {
		srv.stop()
		clean()
		return nil, err
	}
	return &ownServer{srv: srv, dbURL: dbURL, tenant: t, clean: clean}, nil
}

// firstAttempt is scenario (h): lead creates at a steady rate (an open
// loop, each create on its own), one healthy endpoint; the receiver
// records each lead.created event's arrival minus its createdAt (the
// creating transaction's time, before its commit: the figure errs long).
func (b *hookBench) firstAttempt(ctx context.Context, tw io.Writer) ([]benchLine, error) {
	if _, err := b.endpoint(ctx, "latency"); err != nil {
		return nil, err
	}
	before, err := b.events(ctx)
	if err != nil {
		return nil, err
	}
	mk := leadRequest(b.srv.base, b.token, &b.seq, true)
	start := time.Now()
	b.rcv.measureLatency(start)
	stop := b.profile("webhook-h", 0, b.c.duration-time.Second)
	tick := time.NewTicker(time.Second / time.Duration(*hookRate))
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	for time.Since(start) < b.c.duration {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := mk(0)
			res, err := b.client.Do(req)
			if err != nil {
				failed.Add(1)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				failed.Add(1)
				return
			}
			sent.Add(1)
		}()
	}
	tick.Stop()
	wg.Wait()
	stop()
	if err := b.waitReceived(ctx, before, "latency"); err != nil {
		return nil, err
	}
	lat := b.rcv.latencies()
	if int64(len(lat)) != sent.Load() {
		return nil, fmt.Errorf("%d leads created, %d lead.created deliveries timed", sent.Load(), len(lat))
	}
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	fmt.Fprintf(tw, "%s\tp50 %s, p99 %s, max %s (%d at %d/s)\t-\t-\t-\t\n", hookScenarioNames[1], ms(p50), ms(p99), ms(lat[len(lat)-1]), len(lat), *hookRate)
	lines := []benchLine{{"(h) commit to first attempt p99", ms(p99), "≤ " + ms(maxFirstP99), p99 <= maxFirstP99}}
	if failed.Load() > 0 {
		lines = append(lines, benchLine{"(h) create errors", strconv.FormatInt(failed.Load(), 10), "0", false})
	}
	return lines, nil
}

// waitReceived waits until the endpoints named have received every event
// of the workspace after the first `before`.
func (b *hookBench) waitReceived(ctx context.Context, before int64, names ...string) error {
	return b.waitReceivedWithin(ctx, before, 3*time.Minute, names...)
}

// waitReceivedWithin is waitReceived for at most within.
func (b *hookBench) waitReceivedWithin(ctx context.Context, before int64, within time.Duration, names ...string) error {
	after, err := b.events(ctx)
	if err != nil {
		return err
	}
	want := int(after-before) * len(names)
	deadline := time.Now().Add(within)
	for b.rcv.received(names...) < want {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("received %d of %d deliveries", b.rcv.received(names...), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// throughput is scenario (g): a backlog of events, made while the
// endpoints are disabled, drained to -webhook-endpoints endpoints once
// they are enabled again (each resumes from its place in the feed): the
// rate is every delivery over the time from enabling to the last arrival.
// The baseline is the same receiver driven by a plain Go HTTP client loop,
// as many requests in flight, each signed, the body of a real delivery:
// what the machine can do at all.
func (b *hookBench) throughput(ctx context.Context, tw io.Writer) ([]benchLine, error) {
	k := *hookEndpoints
	var ids, names []string
	for i := range k {
		name := "drain-" + strconv.Itoa(i)
		id, err := b.endpoint(ctx, name)
		if err != nil {
			return nil, err
		}
		ids, names = append(ids, id), append(names, name)
	}
	if err := b.setStatus(ctx, "disabled", ids...); err != nil {
		return nil, err
	}
	before, err := b.events(ctx)
	if err != nil {
		return nil, err
	}
	// Every lead of a batch has a new contact: two events a lead.
	perEndpoint := int(minDeliveries*b.c.duration.Seconds()) / k
	batches := max(1, perEndpoint/(2*batchSize))
	for range batches {
		n := b.seq.Add(batchSize)
		var body strings.Builder
		body.WriteString(`{"leads":[`)
		for j := range batchSize {
			if j > 0 {
				body.WriteString(",")
			}
			fmt.Fprintf(&body, `{"contact":{"email":"drain-%d@bench.test","firstName":"Lee"},"source":"web_form","value":{"amount":1000,"currency":"USD"}}`, n-int64(j))
		}
		body.WriteString("]}")
		if s, out, err := b.call(ctx, http.MethodPost, "/api/v1/leads/batch", body.String()); err != nil || s != http.StatusOK {
			return nil, fmt.Errorf("batch create: %d %s %v", s, out, err)
		}
	}
	after, err := b.events(ctx)
	if err != nil {
		return nil, err
	}
	want := int(after-before) * k
	b.resetStatements(ctx)
	cpu0 := cpuNow(b.srv.cmd.Process.Pid, 0, b.pg)
	stop := b.profile("webhook-g", 0, b.c.duration/2)
	start := time.Now()
	if err := b.setStatus(ctx, "enabled", ids...); err != nil {
		return nil, err
	}
	// A drain slower than the line is measured over what arrived in the
	// time a drain at the line would take, three times over.
	got := want
	err = b.waitReceivedWithin(ctx, before, 3*b.c.duration, names...)
	elapsed := time.Unix(0, b.rcv.last.Load()).Sub(start)
	if err != nil {
		got, elapsed = b.rcv.received(names...), time.Since(start)
		fmt.Printf("  %v: the rate is of those\n", err)
	}
	stop()
	cpu := cpuNow(b.srv.cmd.Process.Pid, 0, b.pg).sub(cpu0)
	rate := float64(got) / elapsed.Seconds()
	b.topStatements(ctx)
	// The rest of the backlog goes with the endpoints.
	for _, id := range ids {
		if s, out, err := b.deleteEndpoint(ctx, id); err != nil || s != http.StatusNoContent {
			return nil, fmt.Errorf("delete webhook endpoint: %d %s %v", s, out, err)
		}
	}

	// The baseline: the same number of requests in flight as the engine
	// may have (PARTNER_WEBHOOK_CONCURRENCY per endpoint, 64 a replica).
	inflight := min(64, k**hookPerEP)
	base, err := b.plainClient(ctx, inflight, want)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(tw, "%s\t%.0f/s (%d to %d endpoints, %d in flight; CPU µs each: server %s, postgres %s, receiver %s)\tplain Go client loop\t%.0f/s\t%.2f\t\n",
		hookScenarioNames[0], rate, got, k, inflight, perDelivery(cpu.server, got), perDelivery(cpu.postgres, got), perDelivery(cpu.client, got), base, rate/base)
	return []benchLine{{"(g) webhook deliveries/s", fmt.Sprintf("%.0f/s", rate), fmt.Sprintf("≥ %.0f/s", minDeliveries), rate >= minDeliveries}}, nil
}

// plainClient posts n signed copies of a real delivery's body to the
// receiver from `inflight` goroutines and returns the rate.
func (b *hookBench) plainClient(ctx context.Context, inflight, n int) (float64, error) {
	secret := signature.NewSecret()
	if err := b.rcv.setSecret("baseline", secret); err != nil {
		return 0, err
	}
	sec := []signature.Secret{signature.MustParseSecret(secret)}
	b.rcv.mu.Lock()
	body := b.rcv.sample
	b.rcv.mu.Unlock()
	if body == nil {
		return 0, errors.New("no delivery received to copy")
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: inflight, DisableCompression: true}, Timeout: 10 * time.Second}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	u := b.rcv.url("baseline")
	start := time.Now()
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				id := opaqueid.Format(opaqueid.Event, uuid.New())
				req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				signature.SignedHeaders(sec, id, time.Now(), body).Set(req.Header)
				res, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusNoContent {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		return 0, fmt.Errorf("plain client: %d of %d failed", failed.Load(), n)
	}
	return float64(n) / elapsed.Seconds(), nil
}

// profile takes a CPU profile of the webhook server for d after delay
// when -profile is set, into name.pprof; the returned func waits for it.
func (b *hookBench) profile(name string, delay, d time.Duration) func() {
	return profileServer(b.c.profileDir, b.srv, name, delay, d)
}

// perDelivery renders CPU time per delivery in microseconds.
func perDelivery(d time.Duration, n int) string { return perRequest(d, int64(n)) }

// resetStatements empties pg_stat_statements when it is loaded and
// -profile is set.
func (b *hookBench) resetStatements(ctx context.Context) {
	if b.c.profileDir != "" {
		_, _ = b.pool.Exec(ctx, "SELECT pg_stat_statements_reset()")
	}
}

// topStatements prints the statements that took the most time in the
// run's databases (the webhook scenarios' and, for (i), a1529b5's, each
// line naming its database) when pg_stat_statements is loaded (with -profile:
// -pg-setting shared_preload_libraries=pg_stat_statements and a
// -webhook-sql of CREATE EXTENSION pg_stat_statements).
func (b *hookBench) topStatements(ctx context.Context) {
	if b.c.profileDir == "" {
		return
	}
	rows, err := b.pool.Query(ctx, `SELECT calls, total_exec_time, mean_exec_time, (SELECT datname FROM pg_database WHERE oid = dbid) || ' ' || left(regexp_replace(query, '\s+', ' ', 'g'), 160)
		FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 24`)
	if err != nil {
		return
	}
	defer rows.Close()
	fmt.Println("\ntop statements (pg_stat_statements; database, then statement):")
	for rows.Next() {
		var calls int64
		var total, mean float64
		var q string
		if rows.Scan(&calls, &total, &mean, &q) == nil {
			fmt.Printf("  %8d calls %9.0f ms %7.2f ms/call  %s\n", calls, total, mean, q)
		}
	}
}

// buildAt builds the partnerapi binary of a commit into dir (git archive,
// go build: the working tree is not touched) and returns its path.
func buildAt(ctx context.Context, rev, dir string) (string, error) {
	fmt.Printf("building partnerapi at %s …\n", rev)
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", rev)
	var tarball bytes.Buffer
	archive.Stdout, archive.Stderr = &tarball, os.Stderr
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %w", rev, err)
	}
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	untar.Stdin = &tarball
	if out, err := untar.CombinedOutput(); err != nil {
		return "", fmt.Errorf("untar: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "partnerapi-"+rev)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/partnerapi")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build at %s: %v\n%s", rev, err, out)
	}
	return bin, nil
}
