package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/authvault/authvault/examples/operator/annotator"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/rotation"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// Two workload clusters beside the hub (the suite's cluster), each a real
// kube-apiserver and etcd with its own token issuer; their kubeconfigs are
// Secrets on the hub, as Cluster API keeps them.
var _ = Describe("A fleet", Ordered, Label("long"), func() {
	var workloads [2]*testcluster.Cluster

	BeforeAll(func() {
		var wg sync.WaitGroup
		errs := make([]error, len(workloads))
		for i := range workloads {
			wg.Go(func() { workloads[i], errs[i] = testcluster.Start() })
		}
		wg.Wait()
		DeferCleanup(func() {
			for _, c := range workloads {
				if c != nil {
					Expect(c.Stop()).To(Succeed())
				}
			}
		})
		for _, err := range errs {
			Expect(err).NotTo(HaveOccurred())
		}
	})

	profileSpecs(&workloads)

	// watch runs WatchSecrets on ns of the hub for the rest of the spec.
	watch := func(f *fleet.Fleet, ns string) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- f.WatchSecrets(ctx, fleet.SecretsOptions{Client: admin, Namespace: ns}) }()
		DeferCleanup(func() {
			cancel()
			Expect(<-done).To(Succeed())
		})
	}

	It("keeps two clusters' load and informers going while their kubeconfig Secrets rotate every 3 s and the old tokens are revoked", func(ctx SpecContext) {
		const duration, every = 60 * time.Second, 3 * time.Second
		ns := newNamespace("fleet")
		reg := prometheus.NewRegistry()
		f := fleet.New(fleet.Options{Registerer: reg})
		DeferCleanup(f.Close)
		watch(f, ns)

		// The Secrets' writers: a fresh token every 3 s, the previous one
		// revoked as the new one is written.
		writers, stopWriters := context.WithCancel(ctx)
		var writing sync.WaitGroup
		var rewrites atomic.Int64
		for i, wl := range workloads {
			name := fmt.Sprintf("wl%d", i)
			tok := wl.Issuer.Issue(0)
			putKubeconfigSecret(ctx, ns, name, wl, tok)
			writing.Go(func() {
				defer GinkgoRecover()
				for {
					select {
					case <-writers.Done():
						return
					case <-time.After(every):
					}
					next := wl.Issuer.Issue(0)
					putKubeconfigSecret(writers, ns, name, wl, next)
					wl.Issuer.Revoke(tok)
					tok = next
					rewrites.Add(1)
				}
			})
		}
		DeferCleanup(func() { stopWriters(); writing.Wait() })

		members := make([]*clusterLoad, len(workloads))
		for i := range workloads {
			members[i] = watchCluster(ctx, f, fmt.Sprintf("%s/wl%d", ns, i))
		}
		loadClusters(ctx, members, duration)

		for _, m := range members {
			logins := 0.0
			for _, family := range gather(reg, "authvault_logins_total") {
				for _, metric := range family.GetMetric() {
					if labelOf(metric, "cluster") == m.name && labelOf(metric, "result") == "success" {
						logins += metric.GetCounter().GetValue()
					}
				}
			}
			report("fleet, cluster %s: %d requests in %v while its kubeconfig Secret was rewritten every %v (old token revoked at each), %d caller-visible 401s, %d other errors, %.0f logins, informer: %d list(s), %d watch start(s), %d add events; p50 %v, p99 %v, longest %v",
				m.name, m.stats.Requests, duration, every, m.stats.Unauthorized, m.stats.OtherErrors, logins, m.lists.Load(), m.watches.Load(), m.events.Load(),
				m.stats.P50, m.stats.P99, m.stats.Longest)
			Expect(m.stats.FirstError).NotTo(HaveOccurred(), m.name)
			Expect(m.stats.Unauthorized).To(BeZero(), m.name)
			Expect(m.stats.Requests).To(BeNumerically(">", 100), m.name)
			// client-go's informers list through a watch now (WatchList,
			// sendInitialEvents), older ones by a list then a watch: either
			// way one request started them, and none restarted them.
			Expect(m.lists.Load()+m.watches.Load()).To(BeNumerically("<=", 2), "%s: the informer was started once", m.name)
			Expect(m.lists.Load()).To(BeNumerically("<=", 1), "%s: the informer never relisted", m.name)
			Expect(m.watches.Load()).To(Equal(int64(1)), "%s: its watch was started once, and never again", m.name)
			Expect(m.events.Load()).To(BeNumerically(">", 100), "%s: the watch kept delivering through the rotations", m.name)
			Expect(logins).To(BeNumerically(">=", float64(duration/every)/2), "%s: every rewrite refreshed the vault", m.name)
			again, err := f.RESTConfig(ctx, m.name)
			Expect(err).NotTo(HaveOccurred())
			Expect(again).To(BeIdenticalTo(m.cfg), "the cluster's config is the same object after the rotations")
		}
		Expect(rewrites.Load()).To(BeNumerically(">=", int64(2*(duration/every-2))))
	}, NodeTimeout(5*time.Minute))

	It("closes a cluster's vault and its connections when its Secret is deleted", func(ctx SpecContext) {
		ns := newNamespace("fleet-delete")
		f := fleet.New(fleet.Options{})
		DeferCleanup(f.Close)
		wl := workloads[0]
		port := portOf(wl.Server)
		before := socketsTo(port)
		watch(f, ns)
		putKubeconfigSecret(ctx, ns, "gone", wl, wl.Issuer.Issue(0))
		name := ns + "/gone"
		Eventually(func() *vault.Vault { return f.Vault(name) }).WithTimeout(testwait.Hang).ShouldNot(BeNil())
		cfg, err := f.RESTConfig(ctx, name)
		Expect(err).NotTo(HaveOccurred())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(newSockets(socketsTo(port), before)).NotTo(BeEmpty(), "the vault's connection to the cluster")

		Expect(admin.CoreV1().Secrets(ns).Delete(ctx, "gone-kubeconfig", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() *vault.Vault { return f.Vault(name) }).WithTimeout(testwait.Hang).Should(BeNil())
		Eventually(func() []string { return newSockets(socketsTo(port), before) }).WithTimeout(testwait.Hang).Should(BeEmpty(),
			"this process's connections to the cluster, beyond those it had before the fleet")
		_, err = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		Expect(err).To(MatchError(vault.ErrClosed))
	}, NodeTimeout(time.Minute))

	It("refuses a kubeconfig Secret's exec plugin under the default policy, running nothing", func(ctx SpecContext) {
		ns := newNamespace("fleet-plugin")
		f := fleet.New(fleet.Options{})
		DeferCleanup(f.Close)
		watch(f, ns)
		marker := filepath.Join(GinkgoT().TempDir(), "ran")
		kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: wl, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: %s, args: [-c, "touch %s"], interactiveMode: Never}}}]
contexts: [{name: wl, context: {cluster: wl, user: u}}]
current-context: wl
`, workloads[1].Server, base64.StdEncoding.EncodeToString(workloads[1].CAData), "sh", marker)
		_, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "evil-kubeconfig", Labels: map[string]string{fleet.ClusterNameLabel: "evil"}},
			Data:       map[string][]byte{"value": []byte(kubeconfig)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		name := ns + "/evil"
		Eventually(func() *vault.Vault { return f.Vault(name) }).WithTimeout(testwait.Hang).ShouldNot(BeNil())
		short, cancel := context.WithTimeout(ctx, testwait.Hang) // refused at once
		defer cancel()
		_, err = f.RESTConfig(short, name)
		Expect(err).To(MatchError(ContainSubstring(`exec plugin "sh" is not allowed: plugin policy DenyAll`)))
		Expect(marker).NotTo(BeAnExistingFile())
	}, NodeTimeout(time.Minute))
	It("runs examples/fleet: a manager on the hub with a controller per cluster, through a rotation, and a cluster whose Secret is deleted and created again", func(ctx SpecContext) {
		ns := newNamespace("fleet-example")
		const workNS = "fleet-example"
		tokens := make([]string, len(workloads))
		for i, wl := range workloads {
			tokens[i] = wl.Issuer.Issue(0)
			putKubeconfigSecret(ctx, ns, fmt.Sprintf("wl%d", i), wl, tokens[i])
			cs, err := kubernetes.NewForConfig(wl.Admin)
			Expect(err).NotTo(HaveOccurred())
			_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workNS}}, metav1.CreateOptions{})
			if !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
			for j := range 3 {
				_, err := cs.CoreV1().ConfigMaps(workNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", j)}}, metav1.CreateOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
		}
		hubKubeconfig := writeKubeconfig(fmt.Sprintf("{token: %q}", cluster.Issuer.Issue(0)))
		cmd := exec.CommandContext(ctx, buildExample("fleet"), "--kubeconfig", hubKubeconfig, "--namespace", ns,
			"--workload-namespace", workNS, "--run-for", "30s")
		cmd.Env = append(os.Environ(), "KUBECONFIG=", "HOME="+filepath.Dir(hubKubeconfig))
		var out bytes.Buffer
		var logs strings.Builder
		var logMu sync.Mutex
		log := func() string { logMu.Lock(); defer logMu.Unlock(); return logs.String() }
		cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(GinkgoWriter, lockedWriter{&logs, &logMu})
		Expect(cmd.Start()).To(Succeed())

		annotated := func(wl *testcluster.Cluster) func(Gomega) {
			return func(g Gomega) {
				cs, err := kubernetes.NewForConfig(wl.Admin)
				g.Expect(err).NotTo(HaveOccurred())
				cms, err := cs.CoreV1().ConfigMaps(workNS).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				for _, cm := range cms.Items {
					g.Expect(cm.Annotations).To(HaveKey(annotator.Annotation), cm.Name)
				}
			}
		}
		for _, wl := range workloads {
			Eventually(annotated(wl)).WithTimeout(testwait.Hang).Should(Succeed())
		}
		// Rotate wl0's kubeconfig, revoke the old token, and give wl0 new
		// ConfigMaps: the controller there annotates them on the new token.
		putKubeconfigSecret(ctx, ns, "wl0", workloads[0], workloads[0].Issuer.Issue(0))
		workloads[0].Issuer.Revoke(tokens[0])
		cs, err := kubernetes.NewForConfig(workloads[0].Admin)
		Expect(err).NotTo(HaveOccurred())
		for j := 3; j < 6; j++ {
			_, err := cs.CoreV1().ConfigMaps(workNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", j)}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(annotated(workloads[0])).WithTimeout(testwait.Hang).Should(Succeed())

		// wl1's Secret deleted: its controller stops. Created again: wl1
		// comes back with a new controller, of the same name, which
		// annotates what was created meanwhile.
		Expect(admin.CoreV1().Secrets(ns).Delete(ctx, "wl1-kubeconfig", metav1.DeleteOptions{})).To(Succeed())
		left := fmt.Sprintf(`"msg":"cluster left the fleet: its controller has stopped","cluster":"%s/wl1"`, ns)
		Eventually(log).WithTimeout(testwait.Hang).Should(ContainSubstring(left), "the example's log")
		cs, err = kubernetes.NewForConfig(workloads[1].Admin)
		Expect(err).NotTo(HaveOccurred())
		for j := 3; j < 6; j++ {
			_, err := cs.CoreV1().ConfigMaps(workNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", j)}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		putKubeconfigSecret(ctx, ns, "wl1", workloads[1], workloads[1].Issuer.Issue(0))
		Eventually(annotated(workloads[1])).WithTimeout(testwait.Hang).Should(Succeed(), "the controller of wl1, back")

		Expect(cmd.Wait()).To(Succeed())
		Expect(log()).NotTo(ContainSubstring("already exists"))
		Expect(strings.Count(log(), fmt.Sprintf(`"msg":"cluster joined the fleet: starting its controller","cluster":"%s/wl1"`, ns))).To(Equal(2), "wl1 joined twice")
		for i, joined := range []int{1, 2} {
			Expect(out.String()).To(MatchRegexp(`cluster %s/wl%d: reconciled [1-9][0-9]*, failed 0, joined %d time\(s\)`, ns, i, joined))
		}
	}, NodeTimeout(2*time.Minute))
})

// putKubeconfigSecret writes Cluster API's <name>-kubeconfig Secret for wl
// with tok, creating it the first time.
func putKubeconfigSecret(ctx context.Context, ns, name string, wl *testcluster.Cluster, tok string) {
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: %[1]s, cluster: {server: %[2]q, certificate-authority-data: %[3]s}}]
users: [{name: %[1]s-admin, user: {token: %[4]q}}]
contexts: [{name: %[1]s-admin@%[1]s, context: {cluster: %[1]s, user: %[1]s-admin}}]
current-context: %[1]s-admin@%[1]s
`, name, wl.Server, base64.StdEncoding.EncodeToString(wl.CAData), tok)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: ns, Labels: map[string]string{fleet.ClusterNameLabel: name}},
		Data:       map[string][]byte{"value": []byte(kubeconfig)},
	}
	_, err := admin.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = admin.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
	}
	if ctx.Err() == nil {
		Expect(err).NotTo(HaveOccurred())
	}
}

func portOf(server string) string {
	u, err := url.Parse(server)
	Expect(err).NotTo(HaveOccurred())
	return u.Port()
}

// socketsTo lists this process's established TCP connections to port on
// any address, by socket inode: /proc/net/tcp{,6} filtered by the sockets
// among /proc/self/fd.
func socketsTo(port string) map[string]bool {
	own := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	Expect(err).NotTo(HaveOccurred())
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			own[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var p int
	_, err = fmt.Sscan(port, &p)
	Expect(err).NotTo(HaveOccurred())
	hexPort := fmt.Sprintf(":%04X", p)
	found := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			const established = "01"
			if len(fields) > 9 && strings.HasSuffix(fields[2], hexPort) && fields[3] == established && own[fields[9]] {
				found[fields[9]] = true
			}
		}
	}
	return found
}

// newSockets are the sockets of now that were not in before.
func newSockets(now, before map[string]bool) []string {
	var out []string
	for s := range now {
		if !before[s] {
			out = append(out, s)
		}
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// gather returns reg's families called name.
func gather(reg *prometheus.Registry, name string) []*dto.MetricFamily {
	families, err := reg.Gather()
	Expect(err).NotTo(HaveOccurred())
	var out []*dto.MetricFamily
	for _, f := range families {
		if f.GetName() == name {
			out = append(out, f)
		}
	}
	return out
}

// labelOf is m's label name's value.
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// clusterLoad is one fleet cluster under load: its config, a ConfigMap
// informer built once on it whose lists, watch starts and add events are
// counted, and what the load's callers saw.
type clusterLoad struct {
	name           string
	cfg            *rest.Config
	lists, watches atomic.Int64
	events         atomic.Int64
	stats          rotation.Stats
}

// watchCluster waits for the fleet's cluster name, takes its config and
// starts the counted informer on it, until the spec ends.
func watchCluster(ctx context.Context, f *fleet.Fleet, name string) *clusterLoad {
	m := &clusterLoad{name: name}
	Eventually(func() *vault.Vault { return f.Vault(name) }).WithTimeout(testwait.Hang).ShouldNot(BeNil())
	var err error
	m.cfg, err = f.RESTConfig(ctx, name)
	Expect(err).NotTo(HaveOccurred())
	counted := rest.CopyConfig(m.cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/configmaps") {
				if r.URL.Query().Get("watch") == "true" {
					m.watches.Add(1)
				} else {
					m.lists.Add(1)
				}
			}
			return rt.RoundTrip(r)
		})
	})
	cs, err := kubernetes.NewForConfig(counted)
	Expect(err).NotTo(HaveOccurred())
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	informer := factory.Core().V1().ConfigMaps().Informer()
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { m.events.Add(1) }})
	Expect(err).NotTo(HaveOccurred())
	informerCtx, stopInformer := context.WithCancel(context.Background())
	factory.Start(informerCtx.Done())
	DeferCleanup(func() { stopInformer(); factory.Shutdown() })
	Expect(cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)).To(BeTrue())
	return m
}

// loadClusters runs the rotation workload, 4 workers a cluster, on every
// cluster at once for d, without a client-side limit.
func loadClusters(ctx context.Context, members []*clusterLoad, d time.Duration) {
	var load sync.WaitGroup
	for _, m := range members {
		load.Go(func() {
			cfg := rest.CopyConfig(m.cfg)
			cfg.QPS, cfg.Burst = -1, 0
			cs, err := kubernetes.NewForConfig(cfg)
			Expect(err).NotTo(HaveOccurred())
			m.stats = rotation.Run(ctx, cs, "default", 4, d, nil)
		})
	}
	load.Wait()
}
