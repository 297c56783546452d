package fleet_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testcluster"
)

// BenchmarkClusterCacheRotation: what a token rotation costs a
// controller-runtime cluster.Cluster whose cache holds N ConfigMaps (of
// 1 KiB each), on the embedded kube-apiserver, in two ways:
//
//   - rebuild: a new cluster.Cluster on a rest.Config with the new token,
//     started and synced, the old one stopped: what Cluster API's
//     ClusterCache and multicluster-runtime's Cluster API provider do when
//     a kubeconfig Secret changes (Cluster API Provider AWS rewrites EKS
//     kubeconfigs every 10 to 15 minutes);
//   - fleet: one cluster.Cluster on the fleet member's RESTConfig, kept;
//     the rotation is the member's vault logging in again (what a changed
//     Secret makes WatchSecrets do).
//
// Per rotation: API requests, bytes received (response bodies), the time
// until the cache serves the objects again (a rebuilt cache serves nothing
// until it has synced; the kept one never stops), and allocations
// (-benchmem). Needs KUBEBUILDER_ASSETS (make bench).
func BenchmarkClusterCacheRotation(b *testing.B) {
	c, err := testcluster.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	admin, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{100, 1000} {
		ns := fmt.Sprintf("cache-%d", n)
		fillNamespace(b, admin, ns, n)
		b.Run(fmt.Sprintf("objects=%d/rebuild", n), func(b *testing.B) { benchRebuild(b, c, ns, n) })
		b.Run(fmt.Sprintf("objects=%d/fleet", n), func(b *testing.B) { benchKept(b, c, ns, n) })
	}
}

// fillNamespace makes ns with n ConfigMaps of 1 KiB of data each.
func fillNamespace(b *testing.B, cs kubernetes.Interface, ns string, n int) {
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	data := strings.Repeat("x", 1024)
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"v": data}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// traffic counts the requests sent through it and the bytes of their
// responses' bodies.
type traffic struct {
	requests, bytes atomic.Int64
}

func (t *traffic) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		t.requests.Add(1)
		resp, err := rt.RoundTrip(r)
		if resp != nil && resp.Body != nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &t.bytes}
		}
		return resp, err
	})
}

// startRotations counts from here: what the setup sent is left out, and
// b's timer and allocations start now.
func (t *traffic) startRotations(b *testing.B) {
	t.requests.Store(0)
	t.bytes.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// runningCluster is a started cluster.Cluster whose ConfigMap cache in ns
// has synced.
type runningCluster struct {
	cluster.Cluster
	stop    context.CancelFunc
	stopped sync.WaitGroup
}

func startCluster(b *testing.B, cfg *rest.Config, ns string, n int) *runningCluster {
	cl, err := cluster.New(cfg, func(o *cluster.Options) {
		o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &runningCluster{Cluster: cl, stop: stop}
	r.stopped.Go(func() { _ = cl.Start(ctx) })
	if _, err := cl.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		b.Fatal(err)
	}
	if !cl.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("the cache never synced")
	}
	return r
}

// mustServe fails b unless the cache serves the n ConfigMaps of ns.
func (r *runningCluster) mustServe(b *testing.B, ns string, n int) {
	var list corev1.ConfigMapList
	if err := r.GetCache().List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != n {
		b.Fatalf("the cache serves %d ConfigMaps (%v), want %d", len(list.Items), err, n)
	}
}

func (r *runningCluster) close() {
	r.stop()
	r.stopped.Wait()
}

func benchRebuild(b *testing.B, c *testcluster.Cluster, ns string, n int) {
	var t traffic
	config := func() *rest.Config {
		cfg := &rest.Config{Host: c.Server, BearerToken: c.Issuer.Issue(0), TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData}}
		cfg.Wrap(t.wrap)
		return cfg
	}
	current := startCluster(b, config(), ns, n)
	defer func() { current.close() }()
	current.mustServe(b, ns, n)
	t.startRotations(b)
	var rotating time.Duration
	for range b.N {
		// As ClusterCache does on a changed kubeconfig: disconnect, then
		// connect with the new one. No cache serves in between.
		start := time.Now()
		current.close()
		current = startCluster(b, config(), ns, n)
		rotating += time.Since(start)
		b.StopTimer()
		current.mustServe(b, ns, n)
		b.StartTimer()
	}
	b.StopTimer()
	report(b, &t, rotating)
}

func benchKept(b *testing.B, c *testcluster.Cluster, ns string, n int) {
	var t traffic
	var token atomic.Pointer[string]
	first := c.Issuer.Issue(0)
	token.Store(&first)
	f := fleet.New(fleet.Options{})
	defer f.Close()
	if err := f.Add("bench", func(context.Context) (*login.ConnectionInfo, error) {
		info := c.Token(*token.Load())
		return &info, nil
		// Rotations come minutes apart, not back to back: without a
		// floor of a millisecond, each would wait out the vault's login
		// floor (the initial backoff, 1 s) after the one before.
	}, login.Backoff(time.Millisecond, time.Second)); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	cfg, err := f.RESTConfig(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(t.wrap)
	kept := startCluster(b, cfg, ns, n)
	defer kept.close()
	kept.mustServe(b, ns, n)
	v := f.Vault("bench")
	t.startRotations(b)
	var rotating time.Duration
	for range b.N {
		next := c.Issuer.Issue(0)
		token.Store(&next)
		start := time.Now()
		v.Refresh() // what WatchSecrets does when the Secret changes
		for {
			cred, err := v.Select(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if cred.Info.Token == next {
				break
			}
			time.Sleep(time.Millisecond)
		}
		rotating += time.Since(start)
		b.StopTimer()
		kept.mustServe(b, ns, n) // never stopped
		b.StartTimer()
	}
	b.StopTimer()
	report(b, &t, rotating)
}

// report adds the per-rotation figures to b's line: the requests and bytes
// of the cluster's clients, and the time from the new token to its use
// (rebuilt: to the new cache's sync, none serving meanwhile; kept: to the
// vault handing it out, the cache serving meanwhile).
func report(b *testing.B, t *traffic, rotating time.Duration) {
	b.ReportMetric(float64(t.requests.Load())/float64(b.N), "requests/op")
	b.ReportMetric(float64(t.bytes.Load())/float64(b.N), "bytes-received/op")
	b.ReportMetric(float64(rotating.Microseconds())/1000/float64(b.N), "ms-to-new-token/op")
}
