// Package metrics holds the service's Prometheus series in one registry,
// so that every package counts into the same place and the admin listener
// serves them at GET /metrics. Series names and labels are part of the
// operations contract (docs/observability.md); labels never carry a token,
// a secret, an email or a raw path.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is the one registry of the process. It holds the Go runtime
// and process collectors besides the series below.
var Registry = prometheus.NewRegistry()

var (
	// TokensIssued counts access tokens issued by the token endpoint.
	TokensIssued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "partner_tokens_issued_total",
		Help: "Access tokens issued.",
	})
	// AuthFailures counts failed client authentications and refused bearer
	// tokens, by reason (e.g. "unknown_client", "wrong_secret",
	// "inactive_client", "invalid_token").
	AuthFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "partner_auth_failures_total",
		Help: "Failed client authentications and refused access tokens, by reason.",
	}, []string{"reason"})
	// RateLimited counts requests refused with 429, by bucket ("read",
	// "write", "auth_client", "auth_source").
	RateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "partner_rate_limited_total",
		Help: "Requests refused by a rate limit, by bucket.",
	}, []string{"bucket"})
	// SettingsForeignIDs counts the settings page's requests whose path
	// names a client or a webhook endpoint that is not of the session's
	// workspace (another workspace's, or none), by kind ("client",
	// "webhook_endpoint"); each is answered 404 (issue 34, item 8).
	SettingsForeignIDs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "partner_settings_foreign_ids_total",
		Help: "Settings page requests naming a client or webhook endpoint outside the session's workspace, by kind.",
	}, []string{"kind"})
	// RequestDuration is the OpenTelemetry HTTP server semantic convention
	// in Prometheus form. http_route is the route template
	// ("/api/v1/contacts/{id}"), the RPC procedure, or "unmatched";
	// rpc_grpc_status_code is an RPC's code as a number (0 for OK), empty
	// for REST and plain HTTP: a gRPC failure is an HTTP 200.
	RequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "http_server_request_duration_seconds",
		Help:    "Duration of HTTP server requests (REST, Connect, gRPC and gRPC-Web), by method, route and status.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"http_request_method", "http_route", "http_response_status_code", "rpc_grpc_status_code"})
)

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		TokensIssued, AuthFailures, RateLimited, SettingsForeignIDs, RequestDuration,
	)
	// Every series of the contract exists from the start, at zero, so a
	// dashboard or an alert on rate() needs no first event.
	for _, r := range []string{"unknown_client", "wrong_secret", "inactive_client", "invalid_token",
		"malformed_credentials", "unsupported_auth_scheme"} {
		AuthFailures.WithLabelValues(r)
	}
	for _, b := range []string{"read", "write", "auth_client", "auth_source"} {
		RateLimited.WithLabelValues(b)
	}
	for _, k := range []string{"client", "webhook_endpoint"} {
		SettingsForeignIDs.WithLabelValues(k)
	}
}

// ObserveRequest records one request. The method is kept only when it is
// a standard one, so a client cannot mint label values; rpcCode is the
// RPC's code name ("ok", "invalid_argument") or "".
func ObserveRequest(method, route string, status int, rpcCode string, d time.Duration) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
	default:
		method = "_OTHER"
	}
	k := requestKey{method, route, status, rpcCode}
	o, ok := requestObservers.Load(k)
	if !ok {
		o, _ = requestObservers.LoadOrStore(k, RequestDuration.WithLabelValues(method, route, strconv.Itoa(status), grpcStatus(rpcCode)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

// grpcStatus is the number of an RPC code name ("ok" is 0), as the gRPC
// status it is sent as; "" stays "".
func grpcStatus(name string) string {
	if name == "" {
		return ""
	}
	if name == "ok" {
		return "0"
	}
	var c connect.Code
	if err := c.UnmarshalText([]byte(name)); err != nil {
		return "2" // unknown
	}
	return strconv.Itoa(int(c))
}

// requestObservers holds the series of RequestDuration by label values,
// so that a request costs one map lookup instead of hashing its labels
// and building the status text. Routes are templates and procedures and
// statuses are few, so it stays small.
var requestObservers sync.Map

type requestKey struct {
	method, route string
	status        int
	rpcCode       string
}

// Handler serves the registry and the extra gatherers (such as a
// [PoolCollector]'s registry) in the Prometheus text format.
func Handler(extra ...prometheus.Gatherer) http.Handler {
	gatherers := append(prometheus.Gatherers{Registry}, extra...)
	return promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// PoolRegistry returns a registry that exposes the statistics of a pgx
// pool as pgxpool_* series. Each server has its own pool, so each gets its
// own registry, gathered beside [Registry] by [Handler].
func PoolRegistry(pool PoolStats) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(poolCollector{pool})
	return r
}

// PoolStats is what the pool collector reads: *db.DB has it.
type PoolStats interface{ Stat() *pgxpool.Stat }

type poolCollector struct{ pool PoolStats }

func poolDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("pgxpool_"+name, help, nil, nil)
}

var (
	poolMax          = poolDesc("max_connections", "Maximum size of the PostgreSQL pool.")
	poolTotal        = poolDesc("total_connections", "Connections in the pool: idle, acquired and being opened.")
	poolAcquired     = poolDesc("acquired_connections", "Connections in use by a request.")
	poolIdle         = poolDesc("idle_connections", "Idle connections.")
	poolConstructing = poolDesc("constructing_connections", "Connections being opened.")
	poolAcquires     = poolDesc("acquires_total", "Successful acquisitions of a connection.")
	poolAcquireWait  = poolDesc("acquire_wait_seconds_total", "Time spent acquiring connections.")
	poolEmpty        = poolDesc("empty_acquires_total", "Acquisitions that had to wait for a connection.")
	poolCanceled     = poolDesc("canceled_acquires_total", "Acquisitions canceled by their context.")
	poolNew          = poolDesc("new_connections_total", "Connections opened.")
	poolLifetime     = poolDesc("max_lifetime_destroys_total", "Connections closed for reaching their maximum lifetime.")
	poolIdleDestroy  = poolDesc("max_idle_destroys_total", "Connections closed for idling too long.")
)

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolMax, poolTotal, poolAcquired, poolIdle, poolConstructing,
		poolAcquires, poolAcquireWait, poolEmpty, poolCanceled, poolNew, poolLifetime, poolIdleDestroy} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(poolMax, float64(s.MaxConns()))
	gauge(poolTotal, float64(s.TotalConns()))
	gauge(poolAcquired, float64(s.AcquiredConns()))
	gauge(poolIdle, float64(s.IdleConns()))
	gauge(poolConstructing, float64(s.ConstructingConns()))
	counter(poolAcquires, float64(s.AcquireCount()))
	counter(poolAcquireWait, s.AcquireDuration().Seconds())
	counter(poolEmpty, float64(s.EmptyAcquireCount()))
	counter(poolCanceled, float64(s.CanceledAcquireCount()))
	counter(poolNew, float64(s.NewConnsCount()))
	counter(poolLifetime, float64(s.MaxLifetimeDestroyCount()))
	counter(poolIdleDestroy, float64(s.MaxIdleDestroyCount()))
}
