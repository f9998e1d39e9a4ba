package server

import (
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
// process's own: the pool's, and the reads' when there is a read pool.
func metricsGatherers(d *db.DB) []prometheus.Gatherer {
	g := []prometheus.Gatherer{metrics.PoolRegistry(d)}
	if r := readRegistry(d); r != nil {
		g = append(g, r)
	}
	return g
}
