package fleet

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"

	"github.com/authvault/authvault/login"
)

var (
	benchClusters      = flag.Int("fleet.clusters", 1000, "clusters of BenchmarkFleetRotation (-short: 50)")
	benchRotations     = flag.Int("fleet.rotations", 30, "token rotations per cluster of BenchmarkFleetRotation (-short: 10)")
	benchCertRotations = flag.Int("fleet.cert-rotations", 5, "client-certificate rotations per cluster of BenchmarkFleetRotation (-short: 3)")
	benchSettle        = flag.Duration("fleet.settle", 40*time.Second, "how long BenchmarkFleetRotation waits at most for connections and the heap to settle")
)

// benchWorkers is how many clusters rotate at once.
const benchWorkers = 64

// h2Linger is how long a closed HTTP/2 client connection stays reachable:
// x/net's read loop leaves its health-check timer armed when the
// connection ends, and client-go sets that timer to 30 s (ReadIdleTimeout).
// A settled heap is measured this long after the last connection ended.
const h2Linger = 31 * time.Second

// BenchmarkFleetRotation: 1,000 clusters (loopback HTTP/2 TLS servers, each
// with a CA of its own, that accept their current credential and the one
// before it), each rotating its credential, kept authenticated two ways,
// side by side in one run:
//
//   - authvault: one fleet; each cluster's handler returns its current
//     credential; a rotation is the server's new credential,
//     Vault(name).Refresh (as WatchSecrets does when a kubeconfig Secret
//     changes), the wait until the vault hands the new one out, and a
//     ConfigMap list through the cluster's one clientset, built once on
//     Fleet.RESTConfig.
//   - NewForConfig: what controllers write today (Cluster API, Argo CD): a
//     rotation is the server's new credential, a new rest.Config with it
//     and the CA data, kubernetes.NewForConfig, and the same list; the
//     previous clientset is dropped.
//
// Two kinds of rotation: token, the bearer token changes and the TLS
// settings stay, which client-go's transport cache keys on; cert, the
// kubeconfig's client certificate is reissued, which changes that key.
// Token: 30 rotations per cluster by default, since each of the vault's
// costs a TLS handshake and 1,000 × 100 take about 6 minutes on 2 cores
// (-fleet.rotations 100 is issue 13's full size). Cert: 5, because
// NewForConfig keeps every old connection open until its 90-s idle
// timeout: 1,000 clusters × 5 is 10,000 sockets on both ends, half this
// machine's limit.
//
// An op is one rotation of one cluster: ns/op, B/op and allocs/op are per
// rotation (the servers' share included). The custom metrics, per cluster
// where they say so: live heap (HeapAlloc after GC; the servers' ends of
// the connections included) and client goroutines (the servers' are
// labelled and left out) once every cluster has logged in and settled
// (idle), right after the last rotation (active), and once settled again
// (settled); heap retained per rotation from the end of the warm-up (the
// first tenth of the rotations; none below 10 rotations, and then no
// figure) to the end, both settled;
// connections open per cluster (each cluster is a TLS identity of its own)
// as the servers count them; TLS handshakes per rotation; client-go
// transports created per rotation and transport-cache entries added
// (through client-go's tools/metrics hooks); 401s the servers sent.
// Settled: no cluster with more than one connection open, and h2Linger
// since the last one closed; or -fleet.settle, whichever comes first.
//
//	go test -run '^$' -bench BenchmarkFleetRotation -benchmem -count 1 ./fleet
//
// -fleet.clusters, -fleet.rotations, -fleet.cert-rotations and
// -fleet.settle change the size (after -args); -short makes it 50 clusters
// of 10 and 3 rotations.
func BenchmarkFleetRotation(b *testing.B) {
	clusters, rotations, certRotations := *benchClusters, *benchRotations, *benchCertRotations
	if testing.Short() {
		clusters, rotations, certRotations = min(clusters, 50), min(rotations, 10), min(certRotations, 3)
	}
	for _, certs := range []bool{false, true} {
		n, kind := rotations, "token"
		if certs {
			n, kind = certRotations, "cert"
		}
		for _, s := range rotationSides {
			b.Run(kind+"/"+s.name, func(b *testing.B) {
				runRotation(b, s.new(), rotationRun{clusters: clusters, rotations: n, certs: certs, settle: *benchSettle, workers: benchWorkers})
			})
		}
	}
}

// TestFleetRotation runs the benchmark's scenario small, so that CI keeps
// it working and leak-free. Its clusters rotate one at a time: vaults that
// publish an empty snapshot at once race on the shared one (reported in
// issue 13), which -race would catch here.
func TestFleetRotation(t *testing.T) {
	for _, certs := range []bool{false, true} {
		for _, s := range rotationSides {
			t.Run(fmt.Sprintf("certs=%t/%s", certs, s.name), func(t *testing.T) {
				runRotation(t, s.new(), rotationRun{clusters: 3, rotations: 3, certs: certs, workers: 1})
			})
		}
	}
}

// rotationSide is one way of keeping a cluster's client authenticated
// while its credential rotates.
type rotationSide interface {
	// join makes the client of cluster i and sends it a first request.
	join(ctx context.Context, i int, s *loopbackServer) error
	// rotated has the client of cluster i take m, the credential its
	// server has just rotated to, and send a request.
	rotated(ctx context.Context, i int, s *loopbackServer, m *material) error
	// close ends every client.
	close()
}

var rotationSides = []struct {
	name string
	new  func() rotationSide
}{
	{"authvault", func() rotationSide { return &fleetSide{fleet: New(Options{})} }},
	{"NewForConfig", func() rotationSide { return &newForConfigSide{} }},
}

// fleetSide is authvault: one fleet, one clientset per cluster for good.
type fleetSide struct {
	fleet   *Fleet
	mu      sync.Mutex // guards clients
	clients map[int]kubernetes.Interface
}

func (f *fleetSide) join(ctx context.Context, i int, s *loopbackServer) error {
	err := f.fleet.Add(s.id, func(context.Context) (*login.ConnectionInfo, error) {
		// What a kubeconfig read afresh gives: the server, the CA, the
		// credential of the moment.
		info := &login.ConnectionInfo{Server: s.srv.URL, CAData: bytes.Clone(s.ca.PEM)}
		if m := s.current(); m.cert != nil {
			info.CertificateData, info.PrivateKeyData = m.cert, m.key
		} else {
			info.Token = m.name
		}
		return info, nil
	}, login.ID("kubeconfig"), login.Backoff(time.Millisecond, time.Second)) // rotations come milliseconds apart here: a floor of 1 ms
	if err != nil {
		return err
	}
	cfg, err := f.fleet.RESTConfig(ctx, s.id)
	if err != nil {
		return err
	}
	// One clientset for good sends a cluster's 101 requests within
	// seconds here, where a controller's come minutes apart: no client-side
	// rate limit.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	f.mu.Lock()
	if f.clients == nil {
		f.clients = map[int]kubernetes.Interface{}
	}
	f.clients[i] = cs
	f.mu.Unlock()
	return list(ctx, cs)
}

func (f *fleetSide) rotated(ctx context.Context, i int, s *loopbackServer, m *material) error {
	v := f.fleet.Vault(s.id)
	v.Refresh()
	for { // the new credential comes in the background; the old one serves meanwhile
		cred, err := v.Select(ctx)
		if err != nil {
			return err
		}
		if cred.Info.Token == m.name || (m.cert != nil && bytes.Equal(cred.Info.CertificateData, m.cert)) {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	f.mu.Lock()
	cs := f.clients[i]
	f.mu.Unlock()
	return list(ctx, cs)
}

// close removes the clusters one by one before closing the fleet: Close
// closes their vaults concurrently, which races on the vault package's
// shared empty snapshot (see TestFleetRotation).
func (f *fleetSide) close() {
	for _, name := range f.fleet.Names() {
		f.fleet.Remove(name)
	}
	f.fleet.Close()
}

// newForConfigSide is what users write today: a new rest.Config and
// clientset at every rotation, the previous one dropped.
type newForConfigSide struct {
	mu      sync.Mutex // guards clients
	clients map[int]kubernetes.Interface
}

func (p *newForConfigSide) join(ctx context.Context, i int, s *loopbackServer) error {
	return p.rotated(ctx, i, s, s.current())
}

func (p *newForConfigSide) rotated(ctx context.Context, i int, s *loopbackServer, m *material) error {
	// As clientcmd makes it from the rotated kubeconfig; QPS and Burst
	// left at client-go's defaults, as a kubeconfig leaves them.
	cfg := &rest.Config{Host: s.srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: bytes.Clone(s.ca.PEM)}}
	if m.cert != nil {
		cfg.CertData, cfg.KeyData = m.cert, m.key
	} else {
		cfg.BearerToken = m.name
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.clients == nil {
		p.clients = map[int]kubernetes.Interface{}
	}
	p.clients[i] = cs // the cache of clients replaces the old one
	p.mu.Unlock()
	return list(ctx, cs)
}

func (p *newForConfigSide) close() {
	p.mu.Lock()
	p.clients = nil
	p.mu.Unlock()
}

func list(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	return err
}

// rotationRun is the size of a run.
type rotationRun struct {
	clusters  int
	rotations int           // per cluster, per pass (a benchmark's b.Loop may ask for more passes)
	certs     bool          // rotate client certificates, not tokens
	settle    time.Duration // the longest wait for connections and heap to settle
	workers   int           // clusters rotating at once
}

// runRotation runs the scenario on side and reports the figures when tb is
// a benchmark.
func runRotation(tb testing.TB, side rotationSide, run rotationRun) {
	registerCacheMetrics()
	ctx := context.Background()
	clusters, rotations, settle, workers := run.clusters, run.rotations, run.settle, run.workers
	servers := make([]*loopbackServer, clusters)
	for i := range servers {
		servers[i] = startLoopback(tb, fmt.Sprintf("c%04d", i), run.certs)
	}
	tb.Cleanup(side.close) // before the servers close: cleanups run last first
	cacheBefore := tcache.snapshot()
	base := measure(tb, servers)

	if err := eachCluster(servers, workers, func(i int, s *loopbackServer) error { return side.join(ctx, i, s) }); err != nil {
		tb.Fatalf("first request: %v", err)
	}
	settleConns(servers, settle)
	idle := measure(tb, servers)

	m := &meter{tb: tb}
	round := func() {
		if err := eachCluster(servers, workers, func(i int, s *loopbackServer) error { return side.rotated(ctx, i, s, s.rotate(tb)) }); err != nil {
			tb.Fatalf("request after a rotation: %v", err)
		}
	}
	// Retained heap is measured from the end of a warm-up of a tenth of
	// the rotations, when there are ten or more.
	warmup := rotations / 10
	var warm snapshot
	rounds := 0
	pass := func() {
		for range rotations {
			round()
			rounds++
			if rounds == warmup {
				m.stop()
				settleConns(servers, settle)
				warm = measure(tb, servers)
				m.start()
			}
		}
	}
	openedBefore, resumedBefore := opened(servers), resumed(servers)
	cacheStart := tcache.snapshot()
	if b, ok := tb.(*testing.B); ok {
		m.start()
		for b.Loop() {
			pass()
		}
		m.stop()
	} else {
		m.start()
		pass()
		m.stop()
	}
	rotated := clusters * rounds
	cacheEnd := tcache.snapshot()
	openedEnd, resumedEnd := opened(servers), resumed(servers)
	active := measure(tb, servers)
	settled := settleConns(servers, settle)
	end := measure(tb, servers)

	var rejected int64
	for _, s := range servers {
		rejected += s.rejected.Load()
	}
	if rejected != 0 {
		tb.Errorf("servers answered %d requests with 401", rejected)
	}
	b, ok := tb.(*testing.B)
	if !ok {
		return
	}
	n := float64(clusters)
	perCluster := func(v, from float64) float64 { return (v - from) / n }
	b.ReportMetric(float64(m.elapsed.Nanoseconds())/float64(rotated), "ns/op")
	b.ReportMetric(float64(m.bytes)/float64(rotated), "B/op")
	b.ReportMetric(float64(m.allocs)/float64(rotated), "allocs/op")
	b.ReportMetric(perCluster(float64(idle.heap), float64(base.heap)), "idle-heap-B/cluster")
	b.ReportMetric(perCluster(float64(active.heap), float64(base.heap)), "active-heap-B/cluster")
	b.ReportMetric(perCluster(float64(end.heap), float64(base.heap)), "settled-heap-B/cluster")
	b.ReportMetric(perCluster(float64(idle.goroutines), float64(base.goroutines)), "idle-goroutines/cluster")
	b.ReportMetric(perCluster(float64(active.goroutines), float64(base.goroutines)), "active-goroutines/cluster")
	b.ReportMetric(perCluster(float64(end.goroutines), float64(base.goroutines)), "settled-goroutines/cluster")
	if after := rotated - clusters*warmup; warmup > 0 && after > 0 {
		b.ReportMetric((float64(end.heap)-float64(warm.heap))/float64(after), "retained-B/rotation")
	}
	b.ReportMetric(float64(idle.conns)/n, "idle-conns/cluster")
	b.ReportMetric(float64(active.conns)/n, "active-conns/cluster")
	b.ReportMetric(float64(end.conns)/n, "settled-conns/cluster")
	b.ReportMetric(settled.Seconds(), "settle-s")
	b.ReportMetric(float64(openedEnd-openedBefore)/float64(rotated), "handshakes/rotation")
	b.ReportMetric(float64(resumedEnd-resumedBefore)/float64(rotated), "resumed/rotation")
	b.ReportMetric(float64(cacheEnd.created-cacheStart.created)/float64(rotated), "transports/rotation")
	b.ReportMetric(float64(tcache.snapshot().entries-cacheBefore.entries), "cache-entries-added")
	b.ReportMetric(float64(rejected), "401s")
	b.Logf("%d clusters × %d rotations, warm-up %d; client-go transport cache before and after: %+v → %+v",
		clusters, rounds, warmup, cacheBefore, tcache.snapshot())
}

// eachCluster runs f for every server, workers at a time, and returns the
// first error.
func eachCluster(servers []*loopbackServer, workers int, f func(i int, s *loopbackServer) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(workers, len(servers)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(servers) {
					return
				}
				if err := f(i, servers[i]); err != nil {
					once.Do(func() { first = fmt.Errorf("%s: %w", servers[i].id, err) })
				}
			}
		})
	}
	wg.Wait()
	return first
}

// snapshot is the state of the process at one point of the run.
type snapshot struct {
	heap       uint64 // HeapAlloc after GC: live bytes
	goroutines int    // the client side's
	conns      int64  // open on the servers
}

func measure(tb testing.TB, servers []*loopbackServer) snapshot {
	tb.Helper()
	// Twice: the first collection runs the cleanups of what it found
	// unreachable (client-go's transport cache drops its entries in
	// them), the second frees what they let go.
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var conns int64
	for _, s := range servers {
		conns += s.open()
	}
	return snapshot{heap: ms.HeapAlloc, goroutines: clientGoroutines(tb), conns: conns}
}

func opened(servers []*loopbackServer) int64 {
	var n int64
	for _, s := range servers {
		n += s.opened.Load()
	}
	return n
}

func resumed(servers []*loopbackServer) int64 {
	var n int64
	for _, s := range servers {
		n += s.resumed.Load()
	}
	return n
}

// settleConns waits until no server has more than one connection open and
// h2Linger has passed since the last one closed, at most limit, and returns
// how long it waited.
func settleConns(servers []*loopbackServer, limit time.Duration) time.Duration {
	start := time.Now()
	for {
		extra, last := false, int64(0)
		for _, s := range servers {
			extra = extra || s.open() > 1
			last = max(last, s.lastEnd.Load())
		}
		waited := time.Since(start)
		if waited >= limit || (!extra && time.Since(time.Unix(0, last)) >= h2Linger) {
			return waited
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// meter adds up the time and the allocations of the rotations, leaving
// out the measurements between them.
type meter struct {
	tb      testing.TB
	began   time.Time
	ms      runtime.MemStats
	elapsed time.Duration
	bytes   uint64
	allocs  uint64
}

func (m *meter) start() {
	runtime.ReadMemStats(&m.ms)
	if b, ok := m.tb.(*testing.B); ok {
		b.StartTimer()
	}
	m.began = time.Now()
}

func (m *meter) stop() {
	m.elapsed += time.Since(m.began)
	if b, ok := m.tb.(*testing.B); ok {
		b.StopTimer()
	}
	var now runtime.MemStats
	runtime.ReadMemStats(&now)
	m.bytes += now.TotalAlloc - m.ms.TotalAlloc
	m.allocs += now.Mallocs - m.ms.Mallocs
}

// transportCache observes client-go's TLS transport cache through its
// metrics hooks (k8s.io/client-go/tools/metrics): the entries it holds and
// the transports it made (a miss, a miss after its entry was collected,
// or an uncacheable config) rather than reused (a hit).
type transportCache struct {
	entries, created, hits atomic.Int64
}

type cacheCounts struct{ entries, created, hits int64 }

var (
	tcache        transportCache
	cacheRegister sync.Once
)

func registerCacheMetrics() {
	cacheRegister.Do(func() {
		metrics.Register(metrics.RegisterOpts{TransportCacheEntries: &tcache, TransportCreateCalls: &tcache})
	})
}

func (c *transportCache) Observe(entries int) { c.entries.Store(int64(entries)) }

func (c *transportCache) Increment(result string) {
	if result == "hit" {
		c.hits.Add(1)
		return
	}
	c.created.Add(1)
}

func (c *transportCache) snapshot() cacheCounts {
	return cacheCounts{c.entries.Load(), c.created.Load(), c.hits.Load()}
}
