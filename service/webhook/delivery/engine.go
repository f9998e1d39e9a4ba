package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/internal/webhook/signature"
	"github.com/svat/partnerapi/internal/work/groupcommit"
	"github.com/svat/partnerapi/service/event"
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

// minGap is the least time between two rounds of the engine, and
// refillGap between two rounds that refill slots a backlog's deliveries
// freed: a round started by writes gathers the writes of minGap into one
// fan-out; a backlog is refilled once half of the last claim has ended,
// which bounds the rounds by the work (each claims at least half of the
// one before) rather than by a clock (20 ms between rounds capped 32
// slots in flight at 1,600 deliveries a second in make bench (g)).
const (
	minGap    = 20 * time.Millisecond
	refillGap = 2 * time.Millisecond
	// refillMin is the smallest claim that makes its end worth a round
	// of its own.
	refillMin = 8
)

// DefaultConcurrency is the most requests in flight to one endpoint
// (PARTNER_WEBHOOK_CONCURRENCY).
const DefaultConcurrency = 8

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
	Log     *slog.Logger
}

// Engine delivers the event feed to webhook endpoints. Any number of
// replicas run one each: the fan-out skips endpoints another replica is
// moving, and a delivery is leased to one replica at a time (FOR UPDATE
// SKIP LOCKED), so each attempt is made by one of them; a lease that runs
// out (its replica died mid-delivery) makes the delivery due again.
type Engine struct {
	cfg   Config
	wake  chan struct{}
	slots chan struct{}
	lease time.Duration
	wg    sync.WaitGroup
	// records writes the attempts of concurrent workers in one statement
	// and one commit (group commit, as the token and lead writes do).
	records groupcommit.Queue[attempt, error]
	// claimed is the size of the last claim, ends the deliveries ended
	// since, and refill says that they are half of it (Run then starts
	// the next round after refillGap).
	claimed, ends atomic.Int64
	refill        atomic.Bool
	// woken says that a write (or a replay, a re-enable) woke the engine
	// since its last fan-out; fannedOut is when that was, and fanoutMore
	// that it moved events (Run's goroutine only).
	woken      atomic.Bool
	fannedOut  time.Time
	fanoutMore bool
	// changed says that deliveries changed other than by a fan-out since
	// the last round; idle that nothing was due within a lease at idleAt
	// (Run's goroutine only).
	changed atomic.Bool
	idle    bool
	idleAt  time.Time
	// noEndpoints says that the last fan-out found no enabled endpoint in
	// the database (Run's goroutine only): the next ones wait for
	// restNoEndpoints, or for an endpoint change on this replica (a rise
	// of endpointChanges since noEndpointsGen), so that an ingest with no
	// endpoint to feed pays about one statement a second for its wakes,
	// not fifty.
	noEndpoints     bool
	noEndpointsGen  int64
	rested          bool // a fan-out was put off by the rest
	endpointChanges atomic.Int64
	// moved counts the deliveries fanned out since analyzed (Run's
	// goroutine only).
	moved    int
	analyzed time.Time
	// fanouts counts the fan-out statements run (FanOuts).
	fanouts atomic.Int64
}

const (
	// restNoEndpoints is how long a replica that found no enabled endpoint
	// waits before it fans out again, unless an endpoint changes on it: an
	// endpoint enabled through another replica gets its first deliveries
	// within about this much more.
	restNoEndpoints = time.Second
	analyzeAfter    = 1000
	analyzeEvery    = 5 * time.Second
)

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
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		cfg: cfg, wake: make(chan struct{}, 1), slots: make(chan struct{}, cfg.Workers),
		// A lease outlives the attempt's timeout, so that only a replica
		// that died leaves one to run out.
		lease: cfg.Client.Timeout() + 5*time.Second,
	}
	e.records.Write = e.writeRecords
	return e
}

// attempt is the end of one attempt, as webhook_record takes it.
type attempt struct {
	WorkspaceID, EndpointID uuid.UUID
	EventXid, EventSeq      int64
	Attempts                int32
	Outcome                 string
	NextAttemptAt           *time.Time
	ResponseStatus          *int32
	DurationMs              int32
	Error                   *string
}

// writeRecords records a group of attempts in one statement.
func (e *Engine) writeRecords(ctx context.Context, items []attempt) []error {
	var p dbsqlc.WebhookRecordManyParams
	for _, it := range items {
		p.WorkspaceIDs = append(p.WorkspaceIDs, it.WorkspaceID)
		p.EndpointIds = append(p.EndpointIds, it.EndpointID)
		p.EventXids = append(p.EventXids, it.EventXid)
		p.EventSeqs = append(p.EventSeqs, it.EventSeq)
		p.Attempts = append(p.Attempts, it.Attempts)
		p.Outcomes = append(p.Outcomes, it.Outcome)
		var next time.Time // zero: none
		if it.NextAttemptAt != nil {
			next = *it.NextAttemptAt
		}
		p.NextAttemptAts = append(p.NextAttemptAts, next)
		var status int32
		if it.ResponseStatus != nil {
			status = *it.ResponseStatus
		}
		p.ResponseStatuses = append(p.ResponseStatuses, status)
		p.DurationMs = append(p.DurationMs, it.DurationMs)
		var msg string
		if it.Error != nil {
			msg = *it.Error
		}
		p.Errors = append(p.Errors, msg)
	}
	_, err := db.Q.WebhookRecordMany(ctx, e.cfg.DB.Conn(), p)
	out := make([]error, len(items))
	for i := range out {
		out[i] = err
	}
	return out
}

// Wake makes the engine look for work now: after a write commits (its
// events are in the feed), or a replay or re-enable. It never blocks.
func (e *Engine) Wake() {
	e.woken.Store(true)
	e.poke()
}

// Changed wakes the engine after deliveries changed other than by its
// fan-out (a replay, a re-enable): an idle engine claims again at once.
func (e *Engine) Changed() {
	e.endpointChanges.Add(1)
	e.changed.Store(true)
	e.Wake()
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
		gap := minGap
		if e.refill.Swap(false) {
			gap = refillGap
		}
		if wait := gap - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		next := e.round(ctx)
		if e.rested {
			// The fan-out it put off is made when the rest ends.
			next = min(next, restNoEndpoints-time.Since(e.fannedOut))
		}
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

// round moves the feed into deliveries and starts the due ones, as many
// as there are free workers; it returns how long to wait for the next
// round when nothing wakes the engine (at once while work is left).
func (e *Engine) round(ctx context.Context) time.Duration {
	const retry = time.Second
	// The fan-out holds each endpoint's row while it moves it: a few
	// hundred events at a time keep that short, so that a PATCH or DELETE
	// of the endpoint does not wait past its lock timeout behind it.
	// A round that only refills slots skips it: the writes that woke the
	// engine, one that moved events (more may be left), or minGap since
	// the last one make the next round fan out.
	fanout := e.woken.Swap(false) || e.fanoutMore || time.Since(e.fannedOut) >= minGap
	if fanout && e.noEndpoints && e.endpointChanges.Load() == e.noEndpointsGen && time.Since(e.fannedOut) < restNoEndpoints {
		// No endpoint to feed a moment ago: the writes since stay in the
		// feed, where an endpoint enabled later finds them (each starts
		// from its own place in the feed).
		fanout, e.rested = false, true
	}
	if fanout {
		e.fannedOut, e.rested = time.Now(), false
		gen := e.endpointChanges.Load()
		moved, err := db.Q.WebhookFanout(ctx, e.cfg.DB.Conn(), dbsqlc.WebhookFanoutParams{MaxEndpoints: 100, MaxEvents: 250})
		if err != nil {
			if ctx.Err() == nil {
				e.cfg.Log.Warn("webhook fan-out", "err", err)
			}
			return retry
		}
		e.fanouts.Add(1)
		e.noEndpoints, e.noEndpointsGen = moved < 0, gen
		moved = max(moved, 0)
		e.fanoutMore = moved > 0
		e.analyze(ctx, int(moved))
	}
	// Idle (nothing was due within a lease when last looked): writes wake
	// the engine for their fan-out, and only what that moved, a change or
	// a lease's time makes it claim again, so that a server with no
	// endpoint pays one statement a round, not three.
	if e.changed.Swap(false) || e.fanoutMore {
		e.idle = false
	}
	if idle := time.Since(e.idleAt); e.idle && idle < e.lease {
		return e.lease - idle
	}
	e.idle = false
	free := e.cfg.Workers - len(e.slots)
	if free == 0 {
		return retry / 10
	}
	claimed, err := db.Q.WebhookClaim(ctx, e.cfg.DB.Conn(), dbsqlc.WebhookClaimParams{
		LeaseMs: int32(e.lease / time.Millisecond), PerEndpoint: int32(e.cfg.PerEndpoint), MaxRows: int32(free),
	})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Log.Warn("webhook claim", "err", err)
		}
		return retry
	}
	e.claimed.Store(int64(len(claimed)))
	e.ends.Store(0)
	for _, c := range claimed {
		e.slots <- struct{}{}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer e.ended()
			e.deliver(context.WithoutCancel(ctx), c)
		}()
	}
	switch {
	case len(claimed) == free:
		return retry / 10
	case len(claimed) > 0:
		// Their ends wake the engine; the next round that claims nothing
		// reads when the next delivery falls due.
		return e.lease
	}
	due, err := db.Q.WebhookNextDue(ctx, e.cfg.DB.Conn())
	if err != nil {
		return retry
	}
	wait := time.Until(due)
	if wait >= e.lease {
		e.idle, e.idleAt = true, time.Now()
	}
	if wait <= 0 {
		// Due but not claimable: behind an earlier delivery of its record
		// (whose end wakes the engine), or its client is inactive. Look
		// again in a while rather than spin.
		wait = retry
	}
	// At most a lease apart: another replica may die holding leases that
	// this one should take over, and nothing else tells it.
	return min(max(wait, 5*time.Millisecond), e.lease)
}

// ended frees a delivery's slot and wakes the engine; once as many
// deliveries as half of a large last claim have ended since it, the next
// round refills without minGap.
func (e *Engine) ended() {
	<-e.slots
	if n := e.claimed.Load(); n >= refillMin && e.ends.Add(1) >= n/2 {
		e.refill.Store(true)
	}
	e.poke()
}

// analyze refreshes the delivery table's statistics once fan-outs have
// moved analyzeAfter deliveries since the last time, at most every
// analyzeEvery. The claim is planned with them: a backlog fills the table
// in a second, autovacuum analyses it a minute later at best, and a claim
// planned for an empty table scanned an endpoint's whole backlog for each
// candidate (make bench (g): 12-90 ms a claim at 20,000 pending).
func (e *Engine) analyze(ctx context.Context, moved int) {
	e.moved += moved
	if e.moved < analyzeAfter || time.Since(e.analyzed) < analyzeEvery {
		return
	}
	e.moved, e.analyzed = 0, time.Now()
	if err := db.Q.WebhookDeliveriesAnalyze(ctx, e.cfg.DB.Conn()); err != nil && ctx.Err() == nil {
		e.cfg.Log.Warn("webhook analyze deliveries", "err", err)
	}
}

// deliver makes one attempt and records it.
func (e *Engine) deliver(ctx context.Context, c dbsqlc.WebhookClaimed) {
	body, err := event.Body(e.cfg.Cursors, c.WorkspaceID, dbsqlc.EventListRow{
		ChangeXID: c.EventXid, Seq: c.EventSeq, ID: c.EventID, Type: c.EventType, RecordID: c.RecordID,
		Object: c.Object, Changed: c.Changed, CreatedAt: c.CreatedAt,
	})
	var res outbound.Result
	if err == nil {
		res, err = e.post(ctx, c.Url, c.Secret, c.PreviousSecret, opaqueid.Format(opaqueid.Event, c.EventID), body)
	}
	if err != nil {
		// Not the receiver's doing (a secret or an event that does not
		// render): logged, and retried on the schedule.
		e.cfg.Log.Error("webhook delivery", "endpoint_id", opaqueid.Format(opaqueid.Webhook, c.EndpointID), "err", err)
		res = outbound.Result{Error: "internal_error"}
	}
	outcome, next := e.outcome(c, res)
	p := attempt{
		WorkspaceID: c.WorkspaceID, EndpointID: c.EndpointID, EventXid: c.EventXid, EventSeq: c.EventSeq,
		Attempts: c.Attempts, Outcome: outcome, NextAttemptAt: next, DurationMs: int32(res.Duration / time.Millisecond),
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
func (e *Engine) outcome(c dbsqlc.WebhookClaimed, res outbound.Result) (string, *time.Time) {
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

// post signs body with the endpoint's secrets (both while a rotation
// overlaps) and sends it.
func (e *Engine) post(ctx context.Context, url, current string, previous *string, id string, body []byte) (outbound.Result, error) {
	var secrets []signature.Secret
	for _, s := range []*string{&current, previous} {
		if s == nil || *s == "" {
			continue
		}
		sec, err := signature.ParseSecret(*s)
		if err != nil {
			return outbound.Result{}, fmt.Errorf("parse endpoint secret: %w", err)
		}
		secrets = append(secrets, sec)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	signature.SignedHeaders(secrets, id, time.Now(), body).Set(h)
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
	return e.post(ctx, row.Url, row.Secret, &row.PreviousSecret, id, body)
}

func start(ctx context.Context, q db.DBTX) (int64, int64, error) {
	r, err := db.Q.WebhookStart(ctx, q)
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
