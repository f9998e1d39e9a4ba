package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/internal/observe/metrics"
)

// readRegistry exposes where the reads of db.DB.Reader went, as
// partner_db_reads_total{server="standby"|"primary"}: with a read pool
// (PARTNER_READ_DATABASE_URL), the share the primary still serves is what
// standbys that lag, or fail, cost it. Nil without one.
func readRegistry(d *db.DB) prometheus.Gatherer {
	if !d.HasReadPool() {
		return nil
	}
	r := prometheus.NewRegistry()
	for _, server := range []string{"standby", "primary"} {
		r.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "partner_db_reads_total",
			Help:        "Requests whose reads went to a standby or, the standby lagging or failing, to the primary.",
			ConstLabels: prometheus.Labels{"server": server},
		}, func() float64 {
			s, p := d.ReadStat()
			if server == "standby" {
				return float64(s)
			}
			return float64(p)
		}))
	}
	return r
}

// metricsGatherers are the registries /metrics serves beside the
// process's own: the pool's with partner_db_up, the webhook engine's, and
// the reads' when there is a read pool.
func metricsGatherers(d *db.DB, webhooks prometheus.Gatherer) []prometheus.Gatherer {
	pool := metrics.PoolRegistry(d)
	pool.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "partner_db_up",
		Help: "1 when the primary database answered a ping within 1 s during this scrape, else 0.",
	}, func() float64 { return dbUp(d) }))
	g := []prometheus.Gatherer{pool, webhooks}
	if r := readRegistry(d); r != nil {
		g = append(g, r)
	}
	return g
}

// dbUpTimeout bounds the ping of partner_db_up: an answer slower than it
// is an outage to an alert, as it is to a request (503 within 5 s).
const dbUpTimeout = time.Second

// dbUp is 1 when the database answers a ping (what /readyz asks) within
// dbUpTimeout, else 0: the "database unavailable" alert needs no traffic
// to fire.
func dbUp(d *db.DB) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), dbUpTimeout)
	defer cancel()
	if d.Ping(ctx) != nil {
		return 0
	}
	return 1
}
