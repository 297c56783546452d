package shard

import "github.com/prometheus/client_golang/prometheus"

// metrics are a sharded fleet's metrics, labelled with its group.
type metrics struct {
	reg      prometheus.Registerer // nil: none registered
	owned    prometheus.Gauge
	replicas prometheus.Gauge
	moves    *prometheus.CounterVec
	unowned  prometheus.Histogram
	writes   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, group string) *metrics {
	labels := prometheus.Labels{"group": group}
	m := &metrics{
		reg: reg,
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "authvault_fleet_shard_clusters_owned", ConstLabels: labels,
			Help: "Clusters this replica owns: those whose member, vault and OnAdd are here.",
		}),
		replicas: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "authvault_fleet_shard_replicas", ConstLabels: labels,
			Help: "Replicas of the group alive as this one sees them, itself included while its Lease holds.",
		}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authvault_fleet_shard_moves_total", ConstLabels: labels,
			Help: "Clusters that moved to (direction=in) or from (out) this replica, by reason.",
		}, []string{"direction", "reason"}),
		unowned: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "authvault_fleet_shard_unowned_seconds", ConstLabels: labels,
			Help:    "For each cluster that moved here, how long it may have had no owner: from its previous owner's last renewal seen (a replica gone) or from when this replica saw it should take it, to when it took it.",
			Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 15, 20, 30, 60},
		}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "authvault_fleet_shard_lease_writes_total", ConstLabels: labels,
			Help: "Writes of this replica's Lease: one per RetryPeriod, and one per change of its view.",
		}),
	}
	if reg != nil {
		for i, c := range m.collectors() {
			if err := reg.Register(c); err != nil {
				// Registered already (a second fleet of the group on
				// one registry): counted, not exported.
				for _, r := range m.collectors()[:i] {
					reg.Unregister(r)
				}
				m.reg = nil
				break
			}
		}
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.owned, m.replicas, m.moves, m.unowned, m.writes}
}

// unregister takes the metrics out of the registerer.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}
