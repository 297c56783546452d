package integration

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// controller-runtime's manager suite checks that a stopped manager leaves
// no goroutine behind once its client's idle connections are closed, by
// CloseIdleConnections on the transport it grabs in WrapTransport. The
// same check, on a vault's config: the transport there is the vault's, and
// its CloseIdleConnections closes every idle connection of its pools.
var _ = Describe("A manager on a vault's config", func() {
	It("leaves no goroutine behind once stopped and the vault's idle connections are closed", func(ctx SpecContext) {
		v := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(v.Close)
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			info := cluster.Token(cluster.Issuer.Issue(0))
			return &info, nil
		})
		vcfg, err := v.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		cfg := rest.CopyConfig(vcfg)
		var clientTransport interface{ CloseIdleConnections() }
		// Wrap, not WrapTransport: the vault's own wrapper stays (it is
		// what carries exec and port-forward streams).
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			c, ok := rt.(interface{ CloseIdleConnections() })
			Expect(ok).To(BeTrue(), "the round tripper under client-go's wrappers closes idle connections: %T", rt)
			clientTransport = c
			return rt
		})

		// The token issuer's webhook serves the API server from this
		// process: its connections' goroutines are the server's, not a
		// client's, and may open at any time.
		current := []goleak.Option{goleak.IgnoreCurrent(),
			goleak.IgnoreAnyFunction("net/http.(*conn).serve"), goleak.IgnoreAnyFunction("net/http.(*http2serverConn).serve")}
		m, err := manager.New(cfg, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
		Expect(err).NotTo(HaveOccurred())
		mctx, cancel := context.WithCancel(ctx)
		cancel()
		Expect(m.Start(mctx)).To(Succeed())
		Expect(clientTransport).NotTo(BeNil())
		clientTransport.CloseIdleConnections()
		Eventually(func() error { return goleak.Find(current...) }).WithTimeout(testwait.Hang).Should(Succeed())
	})
})
