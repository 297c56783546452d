package vault

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Login results, the values of the result label.
const (
	resultSuccess = "success" // the vault took a credential
	resultError   = "error"   // the handler failed
	resultNone    = "none"    // the handler returned no credential
	resultRefused = "refused" // the vault refused it: rejected before, expired or unchanged
)

// metrics are the vault's Prometheus metrics. Labels carry handler labels
// (a handler's short, stable label: its ID unless it names itself, see
// login.Named) and fixed words, never credential data.
type metrics struct {
	logins        *prometheus.CounterVec
	loginDuration *prometheus.HistogramVec
	invalidations *prometheus.CounterVec
	retries       prometheus.Counter
	gauges        *gaugeCollector

	// registered are the collectors register gave the registerer, as it
	// gave them (wrapped or not), for unregister; set once, by New.
	registered []prometheus.Collector
}

func newMetrics(v *Vault) *metrics {
	return &metrics{
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authvault_logins_total",
			Help: "Login attempts by handler and result (success, error, none, refused).",
		}, []string{"handler", "result"}),
		loginDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "authvault_login_duration_seconds",
			Help:    "How long one login attempt of a handler took.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"handler"}),
		invalidations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authvault_invalidations_total",
			Help: "Credentials invalidated because the server rejected them, by handler.",
		}, []string{"handler"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "authvault_request_retries_total",
			Help: "Requests sent again with another credential after a 401.",
		}),
		gauges: &gaugeCollector{v: v},
	}
}

// clusterLabel is the label that tells apart the vaults whose metrics one
// registry holds: a fleet's clusters, a hub's own vault.
const clusterLabel = "cluster"

// register adds the metrics to r; a nil r registers nothing. Every series
// carries clusterLabel, so that one registry holds the metrics of a plain
// vault and of a fleet's vaults (a registry refuses a name whose label
// names differ): r adds it (a fleet's cluster, a WrapRegistererWith of
// the user's), else the vault does, empty. Which of the two is found by
// trying: a wrapping registerer refuses a label that the collector has
// already.
func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	var labelled []prometheus.Collector
	for _, c := range m.collectors() {
		labelled = append(labelled, prometheus.WrapCollectorWith(prometheus.Labels{clusterLabel: ""}, c))
	}
	err := registerAll(r, labelled)
	if err == nil {
		m.registered = labelled
		return nil
	}
	if registerAll(r, m.collectors()) == nil { // r adds the label
		m.registered = m.collectors()
		return nil
	}
	if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return fmt.Errorf("vault: metrics not registered: another vault's metrics are on this registerer with the same labels; "+
			"give this vault a cluster label of its own: prometheus.WrapRegistererWith(prometheus.Labels{%q: \"<name>\"}, reg): %w", clusterLabel, err)
	}
	return fmt.Errorf("vault: metrics not registered: %w", err)
}

// registerAll registers every one of cs with r, or none.
func registerAll(r prometheus.Registerer, cs []prometheus.Collector) error {
	for i, c := range cs {
		if err := r.Register(c); err != nil {
			for _, done := range cs[:i] {
				r.Unregister(done)
			}
			return err
		}
	}
	return nil
}

// unregister removes the metrics from r, so that a closed vault's gauges
// stop being reported and another vault can take its place.
func (m *metrics) unregister(r prometheus.Registerer) {
	if r == nil {
		return
	}
	for _, c := range m.registered {
		r.Unregister(c)
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.logins, m.loginDuration, m.invalidations, m.retries, m.gauges}
}

func (m *metrics) attempt(handler, result string, took time.Duration) {
	m.logins.WithLabelValues(handler, result).Inc()
	m.loginDuration.WithLabelValues(handler).Observe(took.Seconds())
}

// result is the label value for an attempt's error.
func result(err error) string {
	switch {
	case err == nil:
		return resultSuccess
	case errors.Is(err, errNoCredential):
		return resultNone
	case errors.Is(err, errInvalidated), errors.Is(err, errExpired), errors.Is(err, errUnchanged), errors.Is(err, errRejectedAtOnce):
		return resultRefused
	default:
		return resultError
	}
}

// gaugeCollector reads the vault's state when scraped, so the gauges need no
// bookkeeping on the paths that change it.
type gaugeCollector struct{ v *Vault }

var (
	credentialsDesc = prometheus.NewDesc("authvault_credentials",
		"Credentials by state: valid ones held, invalidated ones kept to be refused if their handler returns them again.", []string{"state"}, nil)
	waitingDesc = prometheus.NewDesc("authvault_waiting_callers",
		"Callers waiting for a login now.", nil, nil)
	waitsDesc = prometheus.NewDesc("authvault_caller_waits_total",
		"Times a caller had to wait for a login: in steady state, only the first login.", nil, nil)
	connectionsDesc = prometheus.NewDesc("authvault_connections",
		"Open connections to API servers: of identities in use (or in their grace period), and of retired ones still serving a request or a watch.",
		[]string{"state"}, nil)
	abandonedDesc = prometheus.NewDesc("authvault_abandoned_calls",
		"Handler calls that an attempt gave up on at their timeout and that have not returned yet (at most one per handler: the handler is not called again before it returns).",
		[]string{"handler"}, nil)
	expiryDesc = prometheus.NewDesc("authvault_credential_expiry_seconds",
		"Seconds until the handler's credential stops being handed out; absent when it does not expire.",
		[]string{"handler"}, nil)
)

func (g *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- credentialsDesc
	ch <- waitingDesc
	ch <- waitsDesc
	ch <- connectionsDesc
	ch <- expiryDesc
	ch <- abandonedDesc
}

func (g *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	v := g.v
	v.mu.Lock()
	now := v.clock.Now()
	valid, invalidated := 0, 0
	type expiry struct {
		handler string
		left    float64
	}
	var expiries []expiry
	abandoned := map[string]float64{}
	for _, h := range v.core.all() {
		abandoned[h.settings.Label] = 0
		if h.abandonedCall() {
			abandoned[h.settings.Label] = 1
		}
		invalidated += len(h.invalidated)
		if h.cred == nil || !h.cred.usable(now) {
			continue
		}
		valid++
		if !h.cred.usableUntil.IsZero() {
			expiries = append(expiries, expiry{h.settings.Label, h.cred.usableUntil.Sub(now).Seconds()})
		}
	}
	v.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(credentialsDesc, prometheus.GaugeValue, float64(valid), "valid")
	ch <- prometheus.MustNewConstMetric(credentialsDesc, prometheus.GaugeValue, float64(invalidated), "invalidated")
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(v.waits.waiting.Load()))
	ch <- prometheus.MustNewConstMetric(waitsDesc, prometheus.CounterValue, float64(v.waits.waited.Load()))
	live, retired := v.pool.openConns()
	ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(live), "live")
	ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(retired), "retired")
	for _, e := range expiries {
		ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, e.left, e.handler)
	}
	for id, n := range abandoned {
		ch <- prometheus.MustNewConstMetric(abandonedDesc, prometheus.GaugeValue, n, id)
	}
}

// isDone tells whether the channel c is closed.
func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
