// Package restart runs the API server restart scenarios (a plain restart, a
// restart with a new serving CA) in a suite of their own: restarting the
// shared API server would disturb the other specs.
package restart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
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

// Ordered: the CA rotation comes last, since it may change the admin's
// client CA along with the serving one.
var _ = Describe("An API server restart mid-load, then a CA rotation", Ordered, func() {
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

	It("a CA rotation is survived without a restart once the CA file holds the new CA, with no write lost or applied twice", func(ctx SpecContext) {
		admin, err := kubernetes.NewForConfig(cluster.Admin)
		Expect(err).NotTo(HaveOccurred())
		ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ca-rotation-"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		caFile := filepath.Join(GinkgoT().TempDir(), "ca.crt")
		Expect(os.WriteFile(caFile, cluster.CAData, 0o600)).To(Succeed())
		v := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(v.Close)
		var logins sync.Map // reason: count
		v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
			reason, _ := login.ReasonFrom(ctx)
			n, _ := logins.LoadOrStore(reason.Kind, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			return &login.ConnectionInfo{Server: cluster.Server, CAPath: caFile, Token: cluster.Issuer.Issue(0)}, nil
		}, login.ID("issuer-with-ca-file"), login.Backoff(250*time.Millisecond, time.Second))
		cfg, err := v.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		cfg.QPS = -1
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		var mu sync.Mutex // guards the four below
		var written []string
		var failures []error
		var caUpdated, firstAfter time.Time
		loadCtx, stop := context.WithTimeout(ctx, 20*time.Second)
		defer stop()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; loadCtx.Err() == nil; i++ {
					name := fmt.Sprintf("w%d-%d", w, i)
					callCtx, cancel := context.WithTimeout(loadCtx, 5*time.Second)
					_, err := cs.CoreV1().ConfigMaps(ns.Name).Create(callCtx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
					cancel()
					now := time.Now()
					mu.Lock()
					switch {
					case err == nil:
						written = append(written, name)
						if !caUpdated.IsZero() && firstAfter.IsZero() {
							firstAfter = now
						}
					case loadCtx.Err() == nil:
						failures = append(failures, err)
					}
					mu.Unlock()
					time.Sleep(20 * time.Millisecond) // a request rate, not a check
				}
			})
		}
		time.Sleep(3 * time.Second) // load before the rotation
		newCA, err := cluster.RotateServingCA(time.Second)
		Expect(err).NotTo(HaveOccurred())
		time.Sleep(2 * time.Second) // the new CA reaches the file later, as a mounted ConfigMap does
		mu.Lock()
		caUpdated = time.Now()
		mu.Unlock()
		Expect(os.WriteFile(caFile, newCA, 0o600)).To(Succeed())
		wg.Wait()

		mu.Lock()
		defer mu.Unlock()
		Expect(firstAfter).NotTo(BeZero(), "no write went through after the CA file was updated")
		tlsLogins := 0
		if n, ok := logins.Load(login.TLSFailure); ok {
			tlsLogins = int(n.(*atomic.Int32).Load())
		}
		report := fmt.Sprintf("CA rotation: %d writes, %d failed while the server was down or its CA unknown, %d logins for a TLS failure; the first write %v after the CA file was updated",
			len(written), len(failures), tlsLogins, firstAfter.Sub(caUpdated).Round(time.Millisecond))
		AddReportEntry("figure", report)
		fmt.Fprintln(GinkgoWriter, report)
		Expect(firstAfter.Sub(caUpdated)).To(BeNumerically("<", 5*time.Second), "recovery after the CA file was updated")
		Expect(tlsLogins).To(BeNumerically(">", 0), "the handler was told of the TLS failure")
		// About 2 s of TLS failures, a backoff of 250 ms doubling to 1 s:
		// five logins or so, not one per failed request.
		Expect(tlsLogins).To(BeNumerically("<=", 8), "logins for TLS failures are spaced by a growing backoff")
		for _, err := range failures {
			Expect(apierrors.IsAlreadyExists(err)).To(BeFalse(), "a write was applied twice: %v", err)
			Expect(apierrors.IsUnauthorized(err)).To(BeFalse(), "a CA rotation is no reason for a 401: %v", err)
		}

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
