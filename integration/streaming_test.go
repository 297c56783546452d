package integration

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
)

// Exec, attach and port-forward, each of client-go's ways, on the vault's
// config, against a Pod that no node runs: the API server answers an
// upgrade it authenticated with noHost, so that answer shows the upgrade
// reached it over TLS the client trusted, with a credential it accepted.
// Before issue 21 every one of them failed with "x509: certificate signed
// by unknown authority": the streaming round trippers dial by themselves
// and never used the vault's Transport.
var _ = Describe("Streams on the vault's config", func() {
	streamsThroughARejection := func(ctx SpecContext, s streamer, kind credKind, fromFleet bool) {
		pod := noHostPod(ctx, "stream")
		reg := prometheus.NewRegistry()
		h := newScript(kind, 2) // the handler's second credential is rejected
		v, cfg := vaultFor(ctx, h, reg, fromFleet)
		failures, rejected := apiserverAuthFailures(ctx), cluster.Issuer.Rejected()

		start := time.Now()
		expectAnswer(s.run(ctx, cfg, pod), noHost)
		good := time.Since(start)
		Expect(counter(reg, "authvault_invalidations_total")).To(BeZero(), "no 401 for a good credential")

		// The handler's next credential is one the API server rejects.
		v.Refresh()
		Eventually(func(g Gomega) {
			g.Expect(h.calls()).To(BeNumerically(">=", 2))
			c, err := v.Select(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Info).To(BeIdenticalTo(h.call(2)))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		start = time.Now()
		err := s.run(ctx, cfg, pod)
		rejectedOnce := time.Since(start)
		expectAnswer(err, noHost)
		for _, secret := range h.secrets() {
			Expect(err.Error()).NotTo(ContainSubstring(secret), "no secret in the error")
		}
		expectAnswer(s.run(ctx, cfg, pod), noHost)

		got401 := apiserverAuthFailures(ctx) - failures
		via := ""
		if fromFleet {
			via = ", fleet"
		}
		report("streams, %s, %s%s: good credential %v; through its rejection %v; the API server sent %d 401(s), the vault invalidated %d, the issuer refused %d review(s), %d logins",
			s.name, kind.name, via, good.Round(time.Millisecond), rejectedOnce.Round(time.Millisecond),
			got401, counter(reg, "authvault_invalidations_total"), cluster.Issuer.Rejected()-rejected, h.calls())
		Expect(got401).To(Equal(1), "one 401 for the one rejected credential: the upgrade went once more with the next, which served")
		Expect(counter(reg, "authvault_invalidations_total")).To(Equal(1))
		Expect(h.calls()).To(Equal(3), "one login after the rejection")
		if kind.name == tokenKind.name {
			Expect(cluster.Issuer.Rejected()-rejected).To(Equal(int64(1)), "the webhook refused the revoked token once")
		}
	}

	var entries []TableEntry
	for _, s := range streamers {
		for _, kind := range []credKind{tokenKind, certKind} {
			entries = append(entries, Entry(fmt.Sprintf("%s, %s", s.name, kind.name), s, kind, false, NodeTimeout(2*time.Minute)))
		}
	}
	// A fleet's config is a vault's: one case of each credential kind.
	fleetCases := map[string]credKind{
		"exec, WebSocket falling back to SPDY":         tokenKind,
		"port-forward, WebSocket falling back to SPDY": certKind,
	}
	for _, s := range streamers {
		if kind, ok := fleetCases[s.name]; ok {
			delete(fleetCases, s.name)
			entries = append(entries, Entry(fmt.Sprintf("%s, %s, from a fleet", s.name, kind.name), s, kind, true, NodeTimeout(2*time.Minute)))
		}
	}
	for name := range fleetCases {
		panic("integration: no streamer named " + name)
	}
	DescribeTable("reach the API server with the credential, and go once more with the next after a 401",
		streamsThroughARejection, entries)
})
