package integration

import (
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// rest.AnonymousClientConfig copies TLSClientConfig.NextProtos, which
// RESTConfig sets to ["h2", "http/1.1"] since issue 21 (before: none).
// Every client-go transport built from such a copy then offers h2 by ALPN
// whatever it speaks: the streaming round trippers, which speak HTTP/1.1,
// and a transport with HTTP/2 turned off by DISABLE_HTTP2. The API server
// picks h2 and the client sends HTTP/1.1 on it. Before issue 21 these
// specs passed; they fail until vault/ changes. With RESTConfig setting
// TLSClientConfig.ServerName (the host of the credential's server) instead
// of NextProtos, another TLS field client-go accepts beside a Transport,
// they pass, and so does every spec of streaming_test.go.
var _ = Describe("Known regressions of the vault's config: rest.AnonymousClientConfig", func() {
	anonymous := func(ctx SpecContext) *rest.Config {
		_, cfg := vaultFor(ctx, newScript(tokenKind), prometheus.NewRegistry(), false)
		anon := rest.AnonymousClientConfig(cfg)
		anon.CAData = cluster.CAData
		return anon
	}

	It("with the cluster's CA streams anonymously, every client-go way, as before", func(ctx SpecContext) {
		anon := anonymous(ctx)
		pod := noHostPod(ctx, "anonymous-streams")
		for _, s := range streamers {
			By(s.name)
			expectAnswer(s.run(ctx, anon, pod), `"system:anonymous"`)
		}
	}, NodeTimeout(2*time.Minute))

	It("with the cluster's CA and DISABLE_HTTP2 set serves requests over HTTP/1.1, as before", func(ctx SpecContext) {
		anon := anonymous(ctx)
		// client-go reads it each time it builds a transport.
		old, had := os.LookupEnv("DISABLE_HTTP2")
		Expect(os.Setenv("DISABLE_HTTP2", "1")).To(Succeed())
		DeferCleanup(func() {
			if had {
				Expect(os.Setenv("DISABLE_HTTP2", old)).To(Succeed())
			} else {
				Expect(os.Unsetenv("DISABLE_HTTP2")).To(Succeed())
			}
		})
		_, err := kubernetes.NewForConfigOrDie(anon).Discovery().ServerVersion()
		Expect(err).NotTo(HaveOccurred(), "/version is public")
	}, NodeTimeout(2*time.Minute))
})
