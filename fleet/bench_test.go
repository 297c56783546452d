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
	benchClusters  = flag.Int("fleet.clusters", 1000, "clusters of BenchmarkFleetRotation (-short: 50)")
	benchRotations = flag.Int("fleet.rotations", 100, "token rotations per cluster of BenchmarkFleetRotation (-short: 10)")
	benchSettle    = flag.Duration("fleet.settle", 10*time.Second, "how long BenchmarkFleetRotation waits for connections to settle to one per cluster")
)

// benchWorkers is how many clusters rotate at once.
const benchWorkers = 64

// BenchmarkFleetRotation: 1,000 clusters (loopback HTTP/2 TLS servers, each
// with a CA of its own, that accept their current bearer token and the one
// before it), each rotating its token 100 times, kept authenticated two
// ways, in one run:
//
//   - authvault: one fleet; each cluster's handler returns its current
//     token; a rotation is the server's new token, Vault(name).Refresh (as
//     WatchSecrets does when a kubeconfig Secret changes), the wait until
//     the vault hands the new token out, and a ConfigMap list through the
//     cluster's one clientset, built once on Fleet.RESTConfig.
//   - NewForConfig: what controllers write today (Cluster API, Argo CD): a
//     rotation is the server's new token, a new rest.Config with it and the
//     CA data, kubernetes.NewForConfig, and the same list; the previous
//     clientset is dropped.
//
// An op is one rotation of one cluster: ns/op, B/op and allocs/op are per
// rotation (the servers' share included). The custom metrics, per cluster
// where they say so: live heap (HeapAlloc after GC) and client goroutines
// (the servers' are labelled and left out) once every cluster has logged in
// and its connections settled (idle), right after the last rotation
// (active), and after the settling wait (settled); heap retained per
// rotation from the end of the warm-up (the first tenth of the rotations)
// to the end, both settled; connections open per cluster (each a TLS
// identity of its own) as the servers count them; TLS handshakes per
// rotation; client-go transports created per rotation and transport-cache
// entries left (tools/metrics); 401s the servers sent.
//
//	go test -run '^$' -bench BenchmarkFleetRotation -benchmem -count 1 ./fleet
//
// -fleet.clusters, -fleet.rotations and -fleet.settle change the size
// (after -args); -short makes it 50 clusters of 10 rotations.
func BenchmarkFleetRotation(b *testing.B) {
	clusters, rotations := *benchClusters, *benchRotations
	if testing.Short() {
		clusters, rotations = min(clusters, 50), min(rotations, 10)
	}
	for _, s := range rotationSides {
		b.Run(s.name, func(b *testing.B) {
			runRotation(b, s.new(), clusters, rotations, *benchSettle, benchWorkers)
		})
	}
}

// TestFleetRotation runs the benchmark's scenario small, so that CI keeps
// it working and leak-free. Its clusters rotate one at a time: vaults that
// publish an empty snapshot at once race on the shared one (reported in
// issue 13), which -race would catch here.
func TestFleetRotation(t *testing.T) {
	for _, s := range rotationSides {
		t.Run(s.name, func(t *testing.T) {
			runRotation(t, s.new(), 3, 4, 0, 1)
		})
	}
}

// rotationSide is one way of keeping a cluster's client authenticated
// while its token rotates.
type rotationSide interface {
	// join makes the client of cluster i and sends it a first request.
	join(ctx context.Context, i int, s *apiServer) error
	// rotated has the client of cluster i take the token its server has
	// just rotated to, and send a request.
	rotated(ctx context.Context, i int, s *apiServer, token string) error
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

func (f *fleetSide) join(ctx context.Context, i int, s *apiServer) error {
	err := f.fleet.Add(s.id, func(context.Context) (*login.ConnectionInfo, error) {
		// What a kubeconfig read afresh gives: the server, the CA, the
		// token of the moment.
		return &login.ConnectionInfo{Server: s.srv.URL, CAData: bytes.Clone(s.ca.PEM), Token: s.token()}, nil
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

func (f *fleetSide) rotated(ctx context.Context, i int, s *apiServer, token string) error {
	v := f.fleet.Vault(s.id)
	v.Refresh()
	for { // the new token comes in the background; the old one serves meanwhile
		cred, err := v.Select(ctx)
		if err != nil {
			return err
		}
		if cred.Info.Token == token {
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

func (p *newForConfigSide) join(ctx context.Context, i int, s *apiServer) error {
	return p.rotated(ctx, i, s, s.token())
}

func (p *newForConfigSide) rotated(ctx context.Context, i int, s *apiServer, token string) error {
	// As clientcmd makes it from the rotated kubeconfig; QPS and Burst
	// left at client-go's defaults, as a kubeconfig leaves them.
	cfg := &rest.Config{Host: s.srv.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: bytes.Clone(s.ca.PEM)}}
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

// runRotation runs the scenario on side with clusters servers, each
// rotating rotations times (more when a benchmark's b.Loop asks for more
// passes), workers clusters at a time, waiting up to settle for
// connections to settle, and reports the figures when tb is a benchmark.
func runRotation(tb testing.TB, side rotationSide, clusters, rotations int, settle time.Duration, workers int) {
	registerCacheMetrics()
	ctx := context.Background()
	servers := make([]*apiServer, clusters)
	for i := range servers {
		servers[i] = startAPIServer(tb, fmt.Sprintf("c%04d", i))
	}
	tb.Cleanup(side.close) // before the servers close: cleanups run last first
	cacheBefore := tcache.snapshot()
	base := measure(tb, servers)

	if err := eachCluster(servers, workers, func(i int, s *apiServer) error { return side.join(ctx, i, s) }); err != nil {
		tb.Fatalf("first request: %v", err)
	}
	settleConns(servers, settle)
	idle := measure(tb, servers)

	m := &meter{tb: tb}
	round := func() {
		if err := eachCluster(servers, workers, func(i int, s *apiServer) error { return side.rotated(ctx, i, s, s.rotate()) }); err != nil {
			tb.Fatalf("request after a rotation: %v", err)
		}
	}
	warmup := max(1, rotations/10)
	var warm snapshot
	var warmOpened int64
	rounds := 0
	pass := func() {
		for r := range rotations {
			round()
			rounds++
			if rounds == warmup {
				m.stop()
				settleConns(servers, settle)
				warm = measure(tb, servers)
				warmOpened = opened(servers)
				m.start()
			}
			_ = r
		}
	}
	openedBefore := opened(servers)
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
	openedEnd := opened(servers)
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
	if after := rotated - clusters*warmup; after > 0 {
		b.ReportMetric((float64(end.heap)-float64(warm.heap))/float64(after), "retained-B/rotation")
	}
	b.ReportMetric(float64(idle.conns)/n, "idle-conns/cluster")
	b.ReportMetric(float64(active.conns)/n, "active-conns/cluster")
	b.ReportMetric(float64(end.conns)/n, "settled-conns/cluster")
	b.ReportMetric(settled.Seconds(), "settle-s")
	b.ReportMetric(float64(openedEnd-openedBefore)/float64(rotated), "handshakes/rotation")
	b.ReportMetric(float64(cacheEnd.created-cacheStart.created)/float64(rotated), "transports/rotation")
	b.ReportMetric(float64(tcache.snapshot().entries-cacheBefore.entries), "cache-entries-added")
	b.ReportMetric(float64(rejected), "401s")
	b.Logf("%d clusters × %d rotations; warm-up %d rounds: %d handshakes after it; transport cache %+v → %+v",
		clusters, rounds, warmup, openedEnd-warmOpened, cacheBefore, tcache.snapshot())
}

// eachCluster runs f for every server, workers at a time, and returns the
// first error.
func eachCluster(servers []*apiServer, workers int, f func(i int, s *apiServer) error) error {
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

func measure(tb testing.TB, servers []*apiServer) snapshot {
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

func opened(servers []*apiServer) int64 {
	var n int64
	for _, s := range servers {
		n += s.opened.Load()
	}
	return n
}

// settleConns waits until no server has more than one connection open,
// at most limit, and returns how long it waited.
func settleConns(servers []*apiServer, limit time.Duration) time.Duration {
	start := time.Now()
	for {
		extra := false
		for _, s := range servers {
			if s.open() > 1 {
				extra = true
				break
			}
		}
		waited := time.Since(start)
		if !extra || waited >= limit {
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
