package integration

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/authvault/authvault/examples/operator/annotator"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

var _ = Describe("A controller-runtime manager", func() {
	It("reconciles through 20 rotations with leader election on, and keeps its leadership", func(ctx SpecContext) {
		ns := newNamespace("manager")
		v := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(v.Close)
		// Tokens live 4 s and are revoked then: the vault rotates them every
		// few seconds before they expire, and a straggler that still uses an
		// old one meets a 401 and is retried.
		const ttl = 4 * time.Second
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			info := cluster.Token(cluster.Issuer.IssueRevoking(ttl, ttl))
			info.Expiration = time.Now().Add(ttl)
			return &info, nil
		}, login.ID("issuer"))
		cfg, err := v.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())

		mgr, err := manager.New(cfg, manager.Options{
			LeaderElection:          true,
			LeaderElectionID:        "authvault-integration",
			LeaderElectionNamespace: ns,
			Metrics:                 metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress:  "0",
			Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
			Logger:                  GinkgoLogr,
		})
		Expect(err).NotTo(HaveOccurred())
		r := &annotator.Reconciler{Client: mgr.GetClient()}
		Expect(r.SetupWithManager(mgr)).To(Succeed())

		mgrCtx, stop := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() {
			defer GinkgoRecover()
			stopped <- mgr.Start(mgrCtx)
		}()
		Eventually(mgr.Elected()).WithTimeout(30 * time.Second).Should(BeClosed())

		start := cluster.Issuer.Issued()
		created := 0
		deadline := time.Now().Add(3 * time.Minute)
		for cluster.Issuer.Issued()-start < 20 && time.Now().Before(deadline) {
			_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", created)},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			created++
			time.Sleep(200 * time.Millisecond) // a stream of work, not a check
		}
		rotations := cluster.Issuer.Issued() - start
		Expect(rotations).To(BeNumerically(">=", 20), "the tokens rotated 20 times")
		Eventually(func(g Gomega) {
			list, err := admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			seen := 0
			for _, cm := range list.Items {
				if cm.Annotations[annotator.Annotation] != "" {
					seen++
				}
			}
			g.Expect(seen).To(Equal(created))
		}).WithTimeout(time.Minute).Should(Succeed())

		Consistently(stopped).WithTimeout(time.Second).ShouldNot(Receive(), "the manager kept running: leadership was never lost")
		stop()
		Expect(<-stopped).To(Succeed())
		report("manager: %d ConfigMaps reconciled through %d rotations, %d reconcile errors", created, rotations, r.Failed.Load())
		Expect(r.Failed.Load()).To(BeZero(), "no reconcile failed")
	}, NodeTimeout(5*time.Minute))
})
