package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/observe/metrics"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/eventtype"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/internal/webhook/signature"
	"github.com/svat/partnerapi/internal/work/groupcommit"
	"github.com/svat/partnerapi/service/event"
	"github.com/svat/partnerapi/service/webhook/secrets"
)

// DefaultSchedule is the wait before each retry after the first attempt
// (PARTNER_WEBHOOK_RETRY_SCHEDULE): about three days in all.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 24 * time.Hour, 24 * time.Hour}

// ParseSchedule reads PARTNER_WEBHOOK_RETRY_SCHEDULE: comma-separated Go
// durations, each above 0, at most 20 of them.
func ParseSchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q is not a duration above 0 (such as 5s, 30m or 24h)", strings.TrimSpace(part))
		}
		out = append(out, d)
	}
	if len(out) > 20 {
		return nil, errors.New("at most 20 retries")
	}
	return out, nil
}

// DefaultConcurrency is the most requests in flight to one endpoint
// (PARTNER_WEBHOOK_CONCURRENCY).
const DefaultConcurrency = 8

// DefaultMaxPending bounds an endpoint's pending deliveries
// (PARTNER_WEBHOOK_MAX_PENDING): the fan-out adds none beyond it, and
// disables an endpoint held there that is not taking its deliveries
// ('backlog'; see webhook_fanout_bounded).
const DefaultMaxPending = 100_000

// Config is what an Engine needs.
type Config struct {
	DB      *db.DB
	Cursors listing.Cursors
	// Client posts the deliveries (its dialer refuses what outbound
	// refuses).
	Client *outbound.Client
	// Schedule is the wait before each retry; DefaultSchedule when nil.
	Schedule []time.Duration
	// PerEndpoint bounds the requests in flight to one endpoint, across
	// replicas; DefaultConcurrency when 0.
	PerEndpoint int
	// Workers bounds this replica's requests in flight; 64 when 0.
	Workers int
	// MaxPending bounds an endpoint's pending deliveries;
	// DefaultMaxPending when 0.
	MaxPending int
	// Secrets opens the endpoints' sealed secrets.
	Secrets secrets.Box
	Log     *slog.Logger
}

// Engine delivers the event feed to webhook endpoints. Any number of
// replicas run one each: the fan-out skips endpoints another replica is
// moving, and a delivery is leased to one replica at a time (FOR UPDATE
// SKIP LOCKED), so each attempt is made by one of them; a lease that runs
// out (its replica died mid-delivery) makes the delivery due again.
//
// Each round fans out (the feed into delivery rows), claims the due
// deliveries, and delivers each on a worker, which records its attempt;
// pace decides when rounds run and which of those steps each takes.
//
// Workspaces share the workers fairly (see shares): however many of one
// workspace's receivers hang, another's deliveries find a worker free at
// once.
type Engine struct {
	cfg   Config
	wake  chan struct{}
	slots chan struct{}
	lease time.Duration
	// stall is how long an endpoint held at the backlog bound may go
	// without a success before the fan-out disables it: longer than any
	// attempt (the client's timeout), plus the 2 s by which the note of a
	// success may lag (webhook_attempts_end notes one a second at most).
	stall  time.Duration
	shares shares
	wg     sync.WaitGroup
	pace   pacer
	// records writes the attempts of concurrent workers in one statement
	// and one commit (group commit, as the token and lead writes do).
	records groupcommit.Queue[attempt, error]
	// fanouts counts the fan-out statements run (FanOuts).
	fanouts atomic.Int64
	// series count the attempts and their lag (counters and a histogram:
	// an attempt adds no statement); backlog reads the gauges of the
	// backlog when /metrics is scraped (see Metrics).
	series  *metrics.Webhooks
	backlog *backlog
}

// claimTypes and claimScopes are the event types and the scope that
// reads each, pairwise, as webhook_claim_due takes them: eventtype.All is
// the one table of them.
var claimTypes, claimScopes = func() (types, scopes []string) {
	for _, t := range eventtype.All {
		types, scopes = append(types, t.Name), append(scopes, t.ScopeName)
	}
	return types, scopes
}()

// New returns an engine; Run starts it.
func New(cfg Config) *Engine {
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = DefaultConcurrency
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 64
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		cfg: cfg, wake: make(chan struct{}, 1), slots: make(chan struct{}, cfg.Workers),
		// A lease outlives the attempt's timeout, so that only a replica
		// that died leaves one to run out.
		lease:  cfg.Client.Timeout() + 5*time.Second,
		stall:  cfg.Client.Timeout() + 2*time.Second,
		shares: newShares(cfg.Workers, cfg.PerEndpoint),
		series: metrics.NewWebhooks(),
	}
	e.backlog = newBacklog(cfg.DB, cfg.Log, cfg.MaxPending)
	e.series.Registry().MustRegister(e.backlog)
	e.records.Write = e.writeRecords
	return e
}

// Metrics are the engine's series for GET /metrics (docs/observability.md,
// "Webhook deliveries"): its attempts by outcome and HTTP class, the lag
// of first attempts, the deliveries it gave up, and the backlog's gauges
// (endpoints by status and reason, pending deliveries, the oldest pending
// age), which are read from the database across workspaces at most every
// 10 s, within 2 s.
func (e *Engine) Metrics() prometheus.Gatherer { return e.series.Registry() }

// attempt is the end of one attempt, as the type webhook_attempt_end
// reads it from JSON (by name; a nil field is null, and so NULL: no next
// attempt for an outcome that sets none, no response status when no HTTP
// answer came, no error for a success).
type attempt struct {
	WorkspaceID    uuid.UUID  `json:"workspace_id"`
	EndpointID     uuid.UUID  `json:"endpoint_id"`
	EventXid       int64      `json:"event_xid"`
	EventSeq       int64      `json:"event_seq"`
	Attempt        int32      `json:"attempt"`
	Outcome        string     `json:"outcome"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	ResponseStatus *int32     `json:"response_status"`
	DurationMs     int32      `json:"duration_ms"`
	Error          *string    `json:"error"`
}

// writeRecords records a group of attempts in one statement.
func (e *Engine) writeRecords(ctx context.Context, items []attempt) []error {
	js, err := json.Marshal(items)
	if err == nil {
		_, err = db.Q.WebhookAttemptsEnd(ctx, e.cfg.DB.Conn(), js)
	} else {
		err = fmt.Errorf("encode attempt ends: %w", err)
	}
	out := make([]error, len(items))
	for i := range out {
		out[i] = err
	}
	return out
}

// Wake makes the engine look for work now: after a write commits (its
// events are in the feed), or a replay or re-enable. It never blocks.
func (e *Engine) Wake() {
	e.pace.wake()
	e.poke()
}

// Changed wakes the engine after deliveries changed other than by its
// fan-out (a replay, a re-enable): an idle engine claims again at once.
func (e *Engine) Changed() {
	e.pace.endpointChanged()
	e.poke()
}

// FanOuts is how many fan-out statements the engine has run: tests see
// by it that a database with no enabled endpoint is not fanned out for
// every write.
func (e *Engine) FanOuts() int64 { return e.fanouts.Load() }

// poke wakes the engine without a fan-out (a slot freed).
func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight
// (bounded by the client's timeout).
func (e *Engine) Run(ctx context.Context) {
	// The record queue outlives the rounds: attempts in flight at the end
	// still record theirs (Do writes alone once the queue has stopped).
	qctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	queued := make(chan struct{})
	go func() { defer close(queued); _ = e.records.Run(qctx) }()
	defer func() { <-queued }()
	defer stop()
	defer e.wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last time.Time
	for {
		// Wakes come with every write: rounds at most minGap apart
		// gather the writes of that time into one fan-out and one claim,
		// so a busy ingest pays a few statements a second for its
		// deliveries, not three per write.
		if wait := e.pace.gap() - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		next := e.pace.restEnd(e.round(ctx))
		if ctx.Err() != nil {
			return
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}

// retryRound is the wait after a statement of a round failed.
const retryRound = time.Second

// round moves the feed into deliveries and starts the due ones, as many
// as there are free workers; it returns how long to wait for the next
// round when nothing wakes the engine (at once while work is left).
func (e *Engine) round(ctx context.Context) time.Duration {
	if ok, gen := e.pace.fanOut(); ok && !e.fanOut(ctx, gen) {
		return retryRound
	}
	if wait, idle := e.pace.idleFor(e.lease); idle {
		return wait
	}
	free := e.cfg.Workers - len(e.slots)
	if free == 0 {
		return retryRound / 10
	}
	claimed, err := e.claim(ctx, free)
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Log.Warn("webhook claim", "err", err)
		}
		return retryRound
	}
	e.pace.claimedN(len(claimed))
	for _, c := range claimed {
		e.slots <- struct{}{}
		e.shares.start(c.WorkspaceID)
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer e.ended(c.WorkspaceID)
			e.deliver(context.WithoutCancel(ctx), c)
		}()
	}
	switch {
	case len(claimed) == free:
		return retryRound / 10
	case len(claimed) > 0:
		// Their ends wake the engine; the next round that claims nothing
		// reads when the next delivery falls due.
		return e.lease
	}
	due, err := db.Q.WebhookNextDue(ctx, e.cfg.DB.Conn())
	if err != nil {
		return retryRound
	}
	wait := time.Until(due)
	e.pace.nextDueIn(wait, e.lease)
	if wait <= 0 {
		// Due but not claimable: behind an earlier delivery of its record
		// (whose end wakes the engine), or its client is inactive. Look
		// again in a while rather than spin.
		wait = retryRound
	}
	// At most a lease apart: another replica may die holding leases that
	// this one should take over, and nothing else tells it.
	return min(max(wait, 5*time.Millisecond), e.lease)
}

// claim leases at most free due deliveries to this replica
// (webhook_claim_sealed), each readable under its client's scopes by the
// event types' table, each workspace's within its share of the workers.
func (e *Engine) claim(ctx context.Context, free int) ([]dbsqlc.WebhookClaimedSealed, error) {
	busyWS, busyN := e.shares.busy()
	return db.Q.WebhookClaimSealed(ctx, e.cfg.DB.Conn(), dbsqlc.WebhookClaimSealedParams{
		LeaseMs: int32(e.lease / time.Millisecond), PerEndpoint: int32(e.cfg.PerEndpoint), MaxRows: int32(free),
		Types: claimTypes, Scopes: claimScopes,
		Pool: int32(e.shares.pool), MinShare: int32(e.shares.least), BusyWs: busyWS, BusyN: busyN,
	})
}

// fanOut moves the feed into deliveries (gen is the count of endpoint
// changes it starts from: see pacer.fanOut), and reports whether the
// statement ran. The fan-out holds each endpoint's row while it moves it:
// a few hundred events at a time keep that short, so that a PATCH or
// DELETE of the endpoint does not wait past its lock timeout behind it.
func (e *Engine) fanOut(ctx context.Context, gen int64) bool {
	r, err := db.Q.WebhookFanout(ctx, e.cfg.DB.Conn(), dbsqlc.WebhookFanoutParams{
		MaxEndpoints: 100, MaxEvents: 250, MaxPending: int32(e.cfg.MaxPending), StallMs: int32(e.stall / time.Millisecond),
	})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Log.Warn("webhook fan-out", "err", err)
		}
		return false
	}
	e.fanouts.Add(1)
	if e.pace.fannedOutDone(gen, r.Enabled, int(r.Moved), int(r.Held)) {
		e.analyze(ctx)
	}
	return true
}

// ended frees a delivery's slot (and its workspace's) and wakes the
// engine (the pacer decides how soon the next round refills).
func (e *Engine) ended(workspace uuid.UUID) {
	e.shares.end(workspace)
	<-e.slots
	e.pace.ended()
	e.poke()
}

// analyze refreshes the delivery table's statistics, once fan-outs have
// moved enough deliveries since the last time (pacer.fannedOutDone). The
// claim is planned with them: a backlog fills the table in a second,
// autovacuum analyses it a minute later at best, and a claim planned for
// an empty table scanned an endpoint's whole backlog for each candidate
// (make bench (g): 12-90 ms a claim at 20,000 pending).
func (e *Engine) analyze(ctx context.Context) {
	if err := db.Q.WebhookDeliveriesAnalyze(ctx, e.cfg.DB.Conn()); err != nil && ctx.Err() == nil {
		e.cfg.Log.Warn("webhook analyze deliveries", "err", err)
	}
}

// deliver makes one attempt and records it.
func (e *Engine) deliver(ctx context.Context, c dbsqlc.WebhookClaimedSealed) {
	if c.Attempts == 1 {
		// From the event's transaction (created_at is its start) to now.
		e.series.FirstAttempt(time.Since(c.CreatedAt))
	}
	body, err := event.Body(ctx, e.cfg.DB.Conn(), e.cfg.Cursors, c.WorkspaceID, dbsqlc.EventListRow{
		ChangeXID: c.EventXid, Seq: c.EventSeq, ID: c.EventID, Type: c.EventType, RecordID: c.RecordID,
		Object: c.Object, Changed: c.Changed, CreatedAt: c.CreatedAt,
	})
	var res outbound.Result
	if err == nil {
		res, err = e.post(ctx, c.WorkspaceID, c.EndpointID, c.Url, sealedPair{c.SecretSealed, &c.Secret, c.PreviousSecretSealed, c.PreviousSecret},
			opaqueid.Format(opaqueid.Event, c.EventID), body)
	}
	if err != nil {
		// Not the receiver's doing (a secret or an event that does not
		// render): logged, and retried on the schedule.
		e.cfg.Log.Error("webhook delivery", "endpoint_id", opaqueid.Format(opaqueid.Webhook, c.EndpointID), "err", err)
		res = outbound.Result{Error: "internal_error"}
	}
	outcome, next := e.outcome(c, res)
	e.series.Attempt(res.Succeeded(), res.ResponseStatus)
	switch outcome {
	case "failed":
		e.series.GiveUp(metrics.GiveUpScheduleEnded)
	case "gone":
		e.series.GiveUp(metrics.GiveUpGone)
	}
	p := attempt{
		WorkspaceID: c.WorkspaceID, EndpointID: c.EndpointID, EventXid: c.EventXid, EventSeq: c.EventSeq,
		Attempt: c.Attempts, Outcome: outcome, NextAttemptAt: next, DurationMs: int32(res.Duration / time.Millisecond),
	}
	if res.ResponseStatus != 0 {
		st := int32(res.ResponseStatus)
		p.ResponseStatus = &st
	}
	if res.Error != "" {
		p.Error = &res.Error
	}
	// The attempt is made: its record must not be lost to a shutdown.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	werr, err := e.records.Do(rctx, p)
	if err == nil {
		err = werr
	}
	if err != nil {
		// The lease runs out and the delivery is made again: at least once.
		e.cfg.Log.Warn("webhook record attempt", "err", err)
	}
}

// outcome says what an attempt's result means: succeeded (2xx), gone
// (410: the endpoint is disabled at once), failed (the schedule is over)
// or retry at the time the schedule, or a longer Retry-After of a 429 or
// 503, says.
func (e *Engine) outcome(c dbsqlc.WebhookClaimedSealed, res outbound.Result) (string, *time.Time) {
	switch {
	case res.Succeeded():
		return "succeeded", nil
	case res.Gone():
		return "gone", nil
	case int(c.Attempts) > len(e.cfg.Schedule):
		return "failed", nil
	}
	wait := e.cfg.Schedule[c.Attempts-1]
	if res.RetryAfter > wait && (res.ResponseStatus == http.StatusTooManyRequests || res.ResponseStatus == http.StatusServiceUnavailable) {
		wait = res.RetryAfter
	}
	next := time.Now().Add(wait)
	return "retry", &next
}

// sealedPair is an endpoint's current and previous secrets as the
// database holds them: each sealed, or (written by release 1.1.0) only in
// the clear.
type sealedPair struct {
	current       []byte
	currentPlain  *string
	previous      []byte
	previousPlain *string
}

// post signs body with the endpoint's secrets (both while a rotation
// overlaps) and sends it.
func (e *Engine) post(ctx context.Context, workspace, endpoint uuid.UUID, url string, p sealedPair, id string, body []byte) (outbound.Result, error) {
	var keys []signature.Secret
	for i, v := range [][]byte{p.current, p.previous} {
		plain := []*string{p.currentPlain, p.previousPlain}[i]
		s, err := e.cfg.Secrets.Open(workspace, endpoint, v, plain)
		if err != nil {
			return outbound.Result{}, err
		}
		if s == "" {
			continue
		}
		sec, err := signature.ParseSecret(s)
		if err != nil {
			return outbound.Result{}, fmt.Errorf("parse endpoint secret: %w", err)
		}
		keys = append(keys, sec)
	}
	if len(keys) == 0 {
		return outbound.Result{}, errors.New("open webhook secret: the endpoint has none")
	}
	h := http.Header{"Content-Type": {"application/json"}}
	signature.SignedHeaders(keys, id, time.Now(), body).Set(h)
	return e.cfg.Client.Post(ctx, url, h, body), nil
}

// Test sends one webhook.test delivery to an endpoint now, signed like
// every delivery, and returns its result; it is not retried or logged in
// the endpoint's deliveries.
func (e *Engine) Test(ctx context.Context, workspace, endpoint uuid.UUID) (outbound.Result, error) {
	row, err := db.Q.WebhookEndpointSecrets(ctx, e.cfg.DB.Conn(), dbsqlc.WebhookEndpointSecretsParams{WorkspaceID: workspace, EndpointID: endpoint})
	if err != nil {
		return outbound.Result{}, fmt.Errorf("read endpoint: %w", err)
	}
	id := opaqueid.Format(opaqueid.Event, uuid.New())
	body := fmt.Appendf(nil, `{"id":%q,"type":"webhook.test","createdAt":%q,"data":{"object":{"id":%q}}}`,
		id, time.Now().UTC().Format(time.RFC3339Nano), opaqueid.Format(opaqueid.Webhook, endpoint))
	return e.post(ctx, workspace, endpoint, row.Url, sealedPair{row.SecretSealed, &row.Secret, row.PreviousSecretSealed, row.PreviousSecret}, id, body)
}

func start(ctx context.Context, q db.DBTX, workspace uuid.UUID) (int64, int64, error) {
	r, err := db.Q.WebhookStart(ctx, q, workspace)
	if err != nil {
		return 0, 0, fmt.Errorf("read feed position: %w", err)
	}
	return r.AfterXID, r.AfterSeq, nil
}

func replay(ctx context.Context, q db.DBTX, workspace, endpoint uuid.UUID, afterXID, afterSeq int64) (int64, error) {
	n, err := db.Q.WebhookReplay(ctx, q, dbsqlc.WebhookReplayParams{WorkspaceID: workspace, EndpointID: endpoint, AfterXID: afterXID, AfterSeq: afterSeq})
	if err != nil {
		return 0, fmt.Errorf("replay deliveries: %w", err)
	}
	return n, nil
}

func resume(ctx context.Context, q db.DBTX, workspace, endpoint uuid.UUID) error {
	if err := db.Q.WebhookResume(ctx, q, dbsqlc.WebhookResumeParams{WorkspaceID: workspace, EndpointID: endpoint}); err != nil {
		return fmt.Errorf("resume deliveries: %w", err)
	}
	return nil
}
