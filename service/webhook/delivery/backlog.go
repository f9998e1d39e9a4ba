package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
)

// Backlog gauges: how often they are read from the database at most, and
// how long one reading may take. A scrape within backlogEvery of the last
// reading is answered from it, so that however many scrapers there are,
// a replica runs the statement at most once in that time; a reading that
// fails or runs out of time leaves the last values (and counts a
// failure), and the scrape answers at once with them.
const (
	backlogEvery   = 10 * time.Second
	backlogTimeout = 2 * time.Second
)

// disabledReasons are the reasons an endpoint is disabled for (the proto's
// WebhookEndpoint.disabled_reason and the table's check): each has its
// series from the start, at 0, so that an alert on it needs no first
// endpoint.
var disabledReasons = []string{"manual", "failing", "gone", "backlog", "client_revoked", "admin", "credentials_revoked"}

var (
	backlogEndpoints = prometheus.NewDesc("partner_webhook_endpoints",
		"Webhook endpoints of every workspace, by status and, when disabled, its reason.",
		[]string{"status", "disabled_reason"}, nil)
	backlogPending = prometheus.NewDesc("partner_webhook_deliveries_pending",
		"Pending webhook deliveries of every workspace (not yet succeeded or given up), by the status of their endpoint; each endpoint's counted up to PARTNER_WEBHOOK_MAX_PENDING.",
		[]string{"endpoint_status"}, nil)
	backlogOldest = prometheus.NewDesc("partner_webhook_oldest_pending_age_seconds",
		"Age of the oldest event with a pending delivery to an enabled endpoint, from its transaction; 0 when none is pending.",
		nil, nil)
)

// backlog is the collector of the delivery backlog's gauges
// (WebhookBacklog): one statement across workspaces, read at most every
// backlogEvery and within backlogTimeout, never per attempt.
type backlog struct {
	db          *db.DB
	log         *slog.Logger
	perEndpoint int32
	failures    prometheus.Counter

	// mu serialises readings: concurrent scrapes wait for one. rows were
	// read at at; tried is when the last reading was tried.
	mu    sync.Mutex
	rows  []dbsqlc.WebhookBacklogRow
	at    time.Time
	tried time.Time
}

func newBacklog(d *db.DB, log *slog.Logger, maxPending int) *backlog {
	return &backlog{db: d, log: log, perEndpoint: int32(maxPending), failures: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "partner_webhook_backlog_read_failures_total",
		Help: "Readings of the webhook backlog gauges that failed or ran out of time (the gauges then keep their last values).",
	})}
}

func (b *backlog) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogEndpoints
	ch <- backlogPending
	ch <- backlogOldest
	b.failures.Describe(ch)
}

func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	rows, at := b.read()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	endpoints := map[[2]string]float64{{statusEnabled, ""}: 0}
	for _, r := range disabledReasons {
		endpoints[[2]string{statusDisabled, r}] = 0
	}
	pending := map[string]float64{statusEnabled: 0, statusDisabled: 0}
	oldest := 0.0
	for _, r := range rows {
		reason := ""
		if r.DisabledReason != nil {
			reason = *r.DisabledReason
		}
		endpoints[[2]string{r.Status, reason}] += float64(r.Endpoints)
		pending[r.Status] += float64(r.Pending)
		if r.Status == statusEnabled && r.Pending > 0 {
			// The age grows with the time since the reading.
			oldest = max(oldest, r.OldestPendingAgeSeconds+time.Since(at).Seconds())
		}
	}
	for k, v := range endpoints {
		gauge(backlogEndpoints, v, k[0], k[1])
	}
	for k, v := range pending {
		gauge(backlogPending, v, k)
	}
	gauge(backlogOldest, oldest)
	b.failures.Collect(ch)
}

// Endpoint statuses, as webhook_endpoints.status holds them.
const (
	statusEnabled  = "enabled"
	statusDisabled = "disabled"
)

// read returns the last reading, made now when it is older than
// backlogEvery.
func (b *backlog) read() ([]dbsqlc.WebhookBacklogRow, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.tried.IsZero() && time.Since(b.tried) < backlogEvery {
		return b.rows, b.at
	}
	// A failed reading too is tried again only after backlogEvery: a
	// database slow to answer is not asked more often.
	b.tried = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	rows, err := db.Q.WebhookBacklog(ctx, b.db.Conn(), b.perEndpoint)
	if err != nil {
		b.failures.Inc()
		b.log.Warn("read webhook backlog metrics", "err", err)
		return b.rows, b.at
	}
	b.rows, b.at = rows, time.Now()
	return b.rows, b.at
}
