package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Webhooks are the series a webhook delivery engine counts into as it
// works: its attempts and the lag of first attempts. Each engine has its
// own (as each server has its own pool registry), gathered by [Handler]
// beside [Registry]; a process runs one engine, so the series are the
// replica's. Every series is resolved once, here: an attempt costs an
// array index and an atomic add, never a label hash or a query.
type Webhooks struct {
	registry *prometheus.Registry
	// attempts[class] are partner_webhook_attempts_total's series, by
	// the index of the class in httpClasses: 2xx is the one success.
	attempts [len(httpClasses)]prometheus.Counter
	// attemptsVec has the rare others (a 2xx that failed, its body cut
	// short by the timeout).
	attemptsVec *prometheus.CounterVec
	lag         prometheus.Histogram
	givenUp     [2]prometheus.Counter
}

// httpClasses are the values of the http_class label: the class of the
// receiver's answer, or none when no HTTP answer came (timeout, refused
// address or connection, TLS, DNS).
var httpClasses = [...]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

// GiveUp reasons, the values of
// partner_webhook_deliveries_given_up_total's reason label.
const (
	// GiveUpScheduleEnded is a delivery whose last attempt of the retry
	// schedule failed.
	GiveUpScheduleEnded = 0
	// GiveUpGone is a delivery answered 410 (its endpoint is disabled,
	// disabledReason gone).
	GiveUpGone = 1
)

// LagBuckets are the bounds of the first-attempt lag histogram: product.md
// promises first attempts within a second, so the buckets are fine below
// it and coarse up to the hour a backlog or an outage may reach.
var LagBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// NewWebhooks returns an engine's series, each at zero, in a registry of
// their own.
func NewWebhooks() *Webhooks {
	w := &Webhooks{registry: prometheus.NewRegistry()}
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "partner_webhook_attempts_total",
		Help: "Webhook delivery attempts made by this replica, by outcome (succeeded: a 2xx; failed: anything else) and the class of the HTTP answer (none: no answer).",
	}, []string{"outcome", "http_class"})
	for c, class := range httpClasses {
		outcome := "failed"
		if class == "2xx" {
			outcome = "succeeded"
		}
		w.attempts[c] = attempts.WithLabelValues(outcome, class)
	}
	w.attemptsVec = attempts
	w.lag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "partner_webhook_first_attempt_lag_seconds",
		Help:    "Time from an event's transaction to the start of its first delivery attempt to an endpoint.",
		Buckets: LagBuckets,
	})
	givenUp := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "partner_webhook_deliveries_given_up_total",
		Help: "Webhook deliveries given up by this replica, by reason (schedule_ended: the last retry failed; gone: the receiver answered 410).",
	}, []string{"reason"})
	w.givenUp[GiveUpScheduleEnded] = givenUp.WithLabelValues("schedule_ended")
	w.givenUp[GiveUpGone] = givenUp.WithLabelValues("gone")
	w.registry.MustRegister(attempts, w.lag, givenUp)
	return w
}

// Registry is where the series are, for [Handler] and for collectors of
// the engine's own (such as its backlog's gauges).
func (w *Webhooks) Registry() *prometheus.Registry { return w.registry }

// Attempt counts one attempt: whether it succeeded (as the engine
// decided: a 2xx read whole), and the receiver's HTTP status, 0 when none
// came.
func (w *Webhooks) Attempt(succeeded bool, status int) {
	c := 0 // none
	if status >= 100 && status < 600 {
		c = status / 100
	}
	if succeeded != (c == 2) {
		outcome := "failed"
		if succeeded {
			outcome = "succeeded"
		}
		w.attemptsVec.WithLabelValues(outcome, httpClasses[c]).Inc()
		return
	}
	w.attempts[c].Inc()
}

// FirstAttempt records the lag of a delivery's first attempt (a negative
// one, of clocks that disagree, as 0).
func (w *Webhooks) FirstAttempt(lag time.Duration) {
	w.lag.Observe(max(lag, 0).Seconds())
}

// GiveUp counts a delivery given up, for reason (GiveUpScheduleEnded or
// GiveUpGone).
func (w *Webhooks) GiveUp(reason int) { w.givenUp[reason].Inc() }
