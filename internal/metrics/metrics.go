// Package metrics holds the service's Prometheus series in one registry,
// so that every package counts into the same place and the admin listener
// serves them at GET /metrics. Series names and labels are part of the
// operations contract (docs/operations.md); labels never carry a token, a
// secret, an email or a raw path.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
)

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		TokensIssued, AuthFailures, RateLimited,
	)
}
