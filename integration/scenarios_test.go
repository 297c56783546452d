package integration

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/rotation"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// whoami asks the API server who the vault's credential is.
func whoami(ctx context.Context, v *vault.Vault) string {
	cfg, err := v.RESTConfig(ctx)
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return review.Status.UserInfo.Username
}

var _ = Describe("Expiry without a freeze", func() {
	It("refreshes short-lived tokens in the background: no caller waits after the first login", func(ctx SpecContext) {
		const duration = 20 * time.Second
		ns := newNamespace("expiry")
		reg := prometheus.NewRegistry()
		v := vault.New(vault.Options{NoFallback: true, Registerer: reg})
		DeferCleanup(v.Close)
		const ttl = 6 * time.Second // the issuer refuses the token after this
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			info := cluster.Token(cluster.Issuer.Issue(ttl))
			info.Expiration = time.Now().Add(ttl)
			return &info, nil
		}, login.ID("short-lived"))
		cfg, err := v.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		cfg.QPS = -1
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		issuedBefore := cluster.Issuer.Issued()
		stats := rotation.Run(ctx, cs, ns, 4, duration, nil)
		waits := metric(reg, "authvault_caller_waits_total")
		report("expiry: %d requests over %v with %v tokens, %d tokens, %d errors, callers waited %.0f times (the first login), longest request %v",
			stats.Requests, duration, ttl, cluster.Issuer.Issued()-issuedBefore, stats.Unauthorized+stats.OtherErrors, waits, stats.Longest)
		Expect(stats.FirstError).NotTo(HaveOccurred())
		Expect(waits).To(Equal(1.0), "only RESTConfig's first login made a caller wait")
		Expect(cluster.Issuer.Issued() - issuedBefore).To(BeNumerically(">=", int64(duration/ttl)))
	}, NodeTimeout(2*time.Minute))
})

var _ = Describe("Client certificates", func() {
	It("rotate, and the old identity's connection closes once its watch ends", func(ctx SpecContext) {
		var n atomic.Int64
		reg := prometheus.NewRegistry()
		v := vault.New(vault.Options{NoFallback: true, Registerer: reg, TransportGrace: -1})
		DeferCleanup(v.Close)
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			user, err := cluster.Env.AddUser(envtest.User{Name: fmt.Sprintf("cert-user-%d", n.Add(1)), Groups: []string{"system:masters"}}, nil)
			if err != nil {
				return nil, err
			}
			cfg := user.Config()
			return &login.ConnectionInfo{Server: cluster.Server, CAData: cfg.CAData, CertificateData: cfg.CertData, PrivateKeyData: cfg.KeyData}, nil
		}, login.ID("certificates"))
		Expect(whoami(ctx, v)).To(Equal("cert-user-1"))

		// A watch with the first identity, open across the rotation.
		cfg, err := v.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		watch, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())

		cred, err := v.Select(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Invalidate(ctx, cred, fmt.Errorf("rotate"))).To(Succeed())
		Expect(whoami(ctx, v)).To(Equal("cert-user-2"))
		Eventually(func() float64 { return labelled(reg, "authvault_connections", "retired") }).
			WithTimeout(testwait.Hang).Should(Equal(1.0), "the watch keeps the old identity's connection")

		watch.Stop()
		Eventually(func() float64 { return labelled(reg, "authvault_connections", "retired") }).
			WithTimeout(testwait.Hang).Should(BeZero(), "closed once idle")
		Expect(labelled(reg, "authvault_connections", "live")).To(Equal(1.0), "the new identity's connection")
	})
})

var _ = Describe("An exec credential plugin through a kubeconfig", func() {
	It("logs in with the plugin's tokens and survives their revocation", func(ctx SpecContext) {
		url, runs, stop := cluster.Issuer.TokenEndpoint(time.Minute, 3*time.Second)
		DeferCleanup(stop)
		kubeconfig := writeKubeconfig(fmt.Sprintf(`
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      interactiveMode: Never
      env:
      - {name: PLUGIN_MODE, value: fetch}
      - {name: PLUGIN_FETCH_URL, value: %q}`, plugin, url))

		v := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(v.Close)
		v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: kubeconfig}), login.ID("kubeconfig"), login.Timeout(30*time.Second))
		Expect(whoami(ctx, v)).To(Equal("authvault-tester"))
		// The first token is revoked after 3 s; the API server's cache of its
		// review ends 10 s later at the most. Keep asking until a new token
		// has been fetched: no request fails meanwhile.
		Eventually(func(g Gomega) {
			g.Expect(whoami(ctx, v)).To(Equal("authvault-tester"))
			g.Expect(runs.Load()).To(BeNumerically(">=", 2))
		}).WithTimeout(40 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(v.Namespace()).To(Equal("default"))
	}, NodeTimeout(2*time.Minute))
})

var _ = Describe("TokenRequest", func() {
	It("acts as a ServiceAccount with tokens the API server mints", func(ctx SpecContext) {
		ns := newNamespace("tenant")
		_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		v := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(v.Close)
		v.OnLogin(handlers.TokenRequest(handlers.TokenRequestConfig{
			Client: admin.CoreV1(), Namespace: ns, Name: "deployer", ExpirationSeconds: 600,
			Cluster: login.ConnectionInfo{Server: cluster.Server, CAData: cluster.CAData},
		}), login.ID("tenant"))
		Expect(whoami(ctx, v)).To(Equal("system:serviceaccount:" + ns + ":deployer"))
		cred, err := v.Select(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(time.Until(cred.Info.Expiration)).To(BeNumerically("~", 10*time.Minute, time.Minute))
	})
})

var _ = Describe("Bad handlers", func() {
	It("keep working on the good handler's credentials, and log each failure", func(ctx SpecContext) {
		var logs testlog.Buffer
		v := vault.New(vault.Options{NoFallback: true, Logger: logs.Logger(0)})
		DeferCleanup(v.Close)
		release := make(chan struct{})
		DeferCleanup(func() { close(release) }) // before Close, which waits for handlers
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { panic("handler bug") }, login.ID("panics"), login.Retries(0))
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			<-release // ignores its context
			return nil, nil
		}, login.ID("hangs"), login.Retries(0), login.Timeout(time.Second))
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			return &login.ConnectionInfo{Server: "not a url", Token: "garbage-token"}, nil
		}, login.ID("garbage"), login.Retries(0))
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			info := cluster.Token(cluster.Issuer.Issue(0))
			return &info, nil
		}, login.ID("good"))

		for range 5 {
			Expect(whoami(ctx, v)).To(Equal("authvault-tester"))
		}
		Eventually(logs.String).WithTimeout(testwait.Hang).Should(And(
			ContainSubstring(`"handler"="panics"`), ContainSubstring("panicked with a value of type string"),
			ContainSubstring(`"handler"="hangs"`), ContainSubstring(`handler \"hangs\" did not return within 1s`),
			ContainSubstring(`"handler"="garbage"`), ContainSubstring("invalid ConnectionInfo"),
		))
		Expect(logs.String()).NotTo(ContainSubstring("garbage-token"))
		Expect(logs.String()).NotTo(ContainSubstring("handler bug"), "a panic value may hold a secret: only its type is logged")
	})
})
