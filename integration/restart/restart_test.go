// Package restart runs the API server restart scenario in a suite of its
// own: restarting the shared API server would disturb the other specs.
package restart

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/internal/testcluster"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

var cluster *testcluster.Cluster

func TestRestart(t *testing.T) {
	testcluster.RunSuite(t, "authvault through an API server restart")
}

var _ = BeforeSuite(func() {
	var err error
	cluster, err = testcluster.Start()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if cluster != nil {
		Expect(cluster.Stop()).To(Succeed())
	}
})

var _ = Describe("An API server restart mid-load", func() {
	It("is survived by the vault and a controller-runtime client, with no write lost or applied twice", func(ctx SpecContext) {
		admin, err := kubernetes.NewForConfig(cluster.Admin)
		Expect(err).NotTo(HaveOccurred())
		ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restart-"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		v := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(v.Close)
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			info := cluster.Token(cluster.Issuer.Issue(0))
			return &info, nil
		}, login.ID("issuer"))
		cfg, err := v.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		cfg.QPS = -1
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		var mu sync.Mutex // guards the three below
		var written []string
		var failures []error
		var afterRestart int
		restarted := make(chan struct{})
		loadCtx, stop := context.WithTimeout(ctx, 25*time.Second)
		defer stop()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; loadCtx.Err() == nil; i++ {
					name := fmt.Sprintf("w%d-%d", w, i)
					callCtx, cancel := context.WithTimeout(loadCtx, 5*time.Second)
					_, err := cs.CoreV1().ConfigMaps(ns.Name).Create(callCtx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
					cancel()
					mu.Lock()
					switch {
					case err == nil:
						written = append(written, name)
						select {
						case <-restarted:
							afterRestart++
						default:
						}
					case loadCtx.Err() == nil:
						failures = append(failures, err)
					}
					mu.Unlock()
					time.Sleep(20 * time.Millisecond) // a request rate, not a check
				}
			})
		}
		time.Sleep(3 * time.Second) // load before the restart
		Expect(cluster.RestartAPIServer(2 * time.Second)).To(Succeed())
		close(restarted)
		wg.Wait()

		mu.Lock()
		defer mu.Unlock()
		report := fmt.Sprintf("restart: %d writes (%d after the restart), %d failed while the server was down", len(written), afterRestart, len(failures))
		AddReportEntry("figure", report)
		fmt.Fprintln(GinkgoWriter, report)
		Expect(afterRestart).To(BeNumerically(">", 0), "the vault served again after the restart")
		for _, err := range failures {
			Expect(apierrors.IsAlreadyExists(err)).To(BeFalse(), "a write was applied twice: %v", err)
			Expect(apierrors.IsUnauthorized(err)).To(BeFalse(), "a restart is no reason for a 401: %v", err)
		}

		// Every write that succeeded is there, once; read through the vault
		// by a controller-runtime client.
		c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
		Expect(err).NotTo(HaveOccurred())
		var list corev1.ConfigMapList
		Expect(c.List(ctx, &list, client.InNamespace(ns.Name))).To(Succeed())
		present := map[string]int{}
		for _, cm := range list.Items {
			present[cm.Name]++
		}
		for _, name := range written {
			Expect(present[name]).To(Equal(1), "write %s", name)
		}
	}, NodeTimeout(3*time.Minute))
})
