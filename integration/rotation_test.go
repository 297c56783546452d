package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/rotation"
	"github.com/authvault/authvault/vault"
)

var _ = Describe("Rotation under load", Label("long"), func() {
	It("shows no caller a failure while every token is revoked 5 s after its issue", func(ctx SpecContext) {
		const duration = 60 * time.Second
		ns := newNamespace("rotation")
		reg := prometheus.NewRegistry()
		v := vault.New(vault.Options{NoFallback: true, Registerer: reg})
		DeferCleanup(v.Close)
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			info := cluster.Token(cluster.Issuer.IssueRevoking(0, 5*time.Second))
			return &info, nil
		}, login.ID("issuer"))
		cfg, err := v.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: all the load reaches the server
		cfg.Wrap(rotation.Traced)  // the longest request's trace shows its time in the vault
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		issuedBefore := cluster.Issuer.Issued()
		stats := rotation.Run(ctx, cs, ns, 8, duration, nil)
		retries := metric(reg, "authvault_request_retries_total")
		logins := cluster.Issuer.Issued() - issuedBefore
		report("rotation under load: %d requests in %v, %d caller-visible 401s, %d other errors, %d logins, %.0f retried requests, p50 %v, p99 %v, longest %v\nthe longest request: %s",
			stats.Requests, duration, stats.Unauthorized, stats.OtherErrors, logins, retries, stats.P50, stats.P99, stats.Longest, stats.LongestTrace)

		Expect(stats.FirstError).NotTo(HaveOccurred())
		Expect(stats.Unauthorized).To(BeZero())
		Expect(stats.OtherErrors).To(BeZero())
		Expect(stats.Requests).To(BeNumerically(">", 100))
		// A token is revoked 5 s after its issue and rejected up to 10 s later.
		Expect(logins).To(BeNumerically(">=", int64(duration/(20*time.Second))), "tokens were revoked, so the vault logged in again")
		Expect(retries).To(BeNumerically(">", 0), "revoked tokens met 401s, and those requests were retried")
	}, NodeTimeout(5*time.Minute))
})

// metric is the value of reg's counter or gauge name, without labels.
func metric(reg *prometheus.Registry, name string) float64 {
	families, err := reg.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		m := f.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	Fail("no metric " + name)
	return 0
}

// labelled is the value of reg's gauge name with label state=value.
func labelled(reg *prometheus.Registry, name, state string) float64 {
	families, err := reg.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == state {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	Fail("no metric " + name + " with state " + state)
	return 0
}
