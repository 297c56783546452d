package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/tcpproxy"
	"github.com/authvault/authvault/testkit/testcluster"
)

// benchFlags configure the bench.
type benchFlags struct {
	clusters, small int
	replicas        int // of the scale bench
	window          time.Duration
	dir             string
	shards          replicaFlags // the Shards durations
}

// hang bounds each wait of the bench: what has not happened by then is not
// coming.
const hang = 3 * time.Minute

// run is one bench: the hub, its namespaces, the replicas and what they
// wrote.
type run struct {
	flags  benchFlags
	hub    *testcluster.Cluster
	admin  kubernetes.Interface
	leases string // namespace

	mu       sync.Mutex // guards events and procs
	events   []tagged
	procs    map[string]*proc
	failures []error
}

// tagged is an event and the replica that wrote it.
type tagged struct {
	replica string
	event
}

// proc is a replica process.
type proc struct {
	cmd   *exec.Cmd
	proxy *tcpproxy.Proxy
	done  chan struct{}
}

// startRun starts the hub (an embedded API server) for a bench of bf;
// stop stops its replicas, then the hub.
func startRun(bf benchFlags) (r *run, stop func(), err error) {
	if err := os.MkdirAll(bf.dir, 0o755); err != nil {
		return nil, nil, err
	}
	hub, err := testcluster.Start()
	if err != nil {
		return nil, nil, err
	}
	admin, err := kubernetes.NewForConfig(hub.Admin)
	if err != nil {
		hub.Stop()
		return nil, nil, err
	}
	r = &run{flags: bf, hub: hub, admin: admin, procs: map[string]*proc{}}
	return r, func() { r.stopAll(); hub.Stop() }, nil
}

func bench(bf benchFlags) (*results, error) {
	r, stop, err := startRun(bf)
	if err != nil {
		return nil, err
	}
	defer stop()
	ctx := context.Background()
	res := &results{flags: bf}

	r.leases = r.namespace(ctx, "leases")
	secrets := r.namespace(ctx, "clusters")
	if err := r.putSecrets(ctx, secrets, bf.clusters); err != nil {
		return nil, err
	}
	writes := r.countLeaseWrites(ctx)

	// Three replicas, from their start until every cluster is owned.
	start := time.Now()
	for _, id := range []string{"r0", "r1", "r2"} {
		if err := r.start(id, secrets, "bench", true); err != nil {
			return nil, err
		}
	}
	if err := r.waitFor("every cluster owned", func(o map[string]string) bool { return len(o) == bf.clusters }); err != nil {
		return res, err
	}
	res.allOwned = time.Since(start)
	res.fromStart = r.sinceStart("r0", "r1", "r2")
	r.settle()
	res.startTakes = r.count("add")
	res.writesLarge = writes(bf.window)
	res.replicas = r.stats("r0", "r1", "r2")

	// SIGKILL of a replica: its clusters, and only they, move.
	var killed time.Time
	if res.kill, killed, err = r.lose("r2", r.kill); err != nil {
		return res, err
	}

	// A fourth replica joins.
	before := r.owners()
	if err := r.start("r3", secrets, "bench", true); err != nil {
		return res, err
	}
	if err := r.waitFor("the joiner's share", func(o map[string]string) bool { return countOf(o, "r3") > 0 && len(o) == bf.clusters }); err != nil {
		return res, err
	}
	r.settle()
	res.join = r.moves(before, r.owners(), "", time.Time{})
	res.joinTime = r.sinceStart("r3")

	// A replica cut from the hub.
	if res.cut, _, err = r.lose("r0", r.cut); err != nil {
		return res, err
	}
	res.overlaps = r.overlaps(map[string]time.Time{"r2": killed})
	r.stopAll()

	// One process, every cluster: what a replica is beside.
	if err := r.start("single", secrets, "", false); err != nil {
		return res, err
	}
	if err := r.waitForLogins("single", bf.clusters); err != nil {
		return res, err
	}
	res.single = r.stats("single")
	r.stopAll()

	// Lease writes with fewer clusters: three new replicas of another
	// group over a namespace of bf.small Secrets.
	few := r.namespace(ctx, "few")
	if err := r.putSecrets(ctx, few, bf.small); err != nil {
		return res, err
	}
	r.reset()
	for _, id := range []string{"s0", "s1", "s2"} {
		if err := r.start(id, few, "few", true); err != nil {
			return res, err
		}
	}
	if err := r.waitFor("every one of the few clusters owned", func(o map[string]string) bool { return len(o) == bf.small }); err != nil {
		return res, err
	}
	r.settle()
	res.writesSmall = writes(bf.window)
	r.stopAll()
	return res, errors.Join(r.failures...)
}

// lose takes the replica id away (how: a kill, a cut), waits until every
// cluster is owned by another and nothing moves, and returns what moved
// and when id was lost.
func (r *run) lose(id string, how func(string)) (moves, time.Time, error) {
	before := r.owners()
	at := time.Now()
	how(id)
	if err := r.waitFor("replica "+id+"'s clusters owned again", func(o map[string]string) bool {
		return len(o) == r.flags.clusters && countOf(o, id) == 0
	}); err != nil {
		return moves{}, at, err
	}
	r.settle()
	return r.moves(before, r.owners(), id, at), at, nil
}

// namespace creates a namespace for prefix.
func (r *run) namespace(ctx context.Context, prefix string) string {
	ns, err := r.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-" + prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	return ns.Name
}

// putSecrets writes n kubeconfig Secrets in ns, Cluster API's way: each
// names the hub's server, with a token of its issuer.
func (r *run) putSecrets(ctx context.Context, ns string, n int) error {
	tok := r.hub.Issuer.Issue(0)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	jobs := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				name := fmt.Sprintf("c%04d", i)
				kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]\nusers: [{name: u, user: {token: %q}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n",
					r.hub.Server, base64.StdEncoding.EncodeToString(r.hub.CAData), tok)
				_, err := r.admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Labels: map[string]string{fleet.ClusterNameLabel: name}},
					Data:       map[string][]byte{"value": []byte(kubeconfig)},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	return <-errs
}

// start starts the replica id over the Secrets of ns, through a proxy of
// its own to the hub.
func (r *run) start(id, ns, group string, sharded bool) error {
	u, _, err := rest.DefaultServerUrlFor(r.hub.Admin)
	if err != nil {
		return err
	}
	proxy, err := tcpproxy.Start(u.Host)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(r.flags.dir, id+".kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: "https://" + proxy.Addr(), CertificateAuthorityData: r.hub.Admin.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: r.hub.Admin.CertData, ClientKeyData: r.hub.Admin.KeyData}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "admin"}
	cfg.CurrentContext = "hub"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return err
	}
	sh := r.flags.shards
	cmd := exec.Command(self(), "-replica", "-identity", id, "-hub", kubeconfig, "-leases", r.leases, "-secrets", ns,
		"-group", group, fmt.Sprintf("-sharded=%t", sharded), fmt.Sprintf("-v=%d", r.flags.shards.verbosity), fmt.Sprintf("-connect=%t", sh.connect),
		"-lease-duration", sh.leaseDuration.String(), "-renew-deadline", sh.renewDeadline.String(), "-retry-period", sh.retryPeriod.String())
	logFile, err := os.Create(filepath.Join(r.flags.dir, id+".log"))
	if err != nil {
		return err
	}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{cmd: cmd, proxy: proxy, done: make(chan struct{})}
	r.mu.Lock()
	r.procs[id] = p
	r.mu.Unlock()
	go func() {
		defer close(p.done)
		defer logFile.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				r.mu.Lock()
				r.events = append(r.events, tagged{id, e})
				r.mu.Unlock()
			}
		}
		_ = cmd.Wait()
	}()
	return nil
}

// self is the program the replicas run: this one, or the test binary,
// whose TestMain runs a replica when its arguments start with -replica.
func self() string { return os.Args[0] }

// kill sends SIGKILL to the replica id.
func (r *run) kill(id string) {
	r.mu.Lock()
	p := r.procs[id]
	r.mu.Unlock()
	_ = p.cmd.Process.Kill()
	<-p.done
	p.proxy.Close()
	r.mu.Lock()
	delete(r.procs, id)
	r.mu.Unlock()
}

// cut closes the replica id's proxy to the hub.
func (r *run) cut(id string) {
	r.mu.Lock()
	p := r.procs[id]
	r.mu.Unlock()
	p.proxy.Close()
}

// stopAll stops every replica (SIGTERM; SIGKILL after a minute).
func (r *run) stopAll() {
	r.mu.Lock()
	ids := slices.Collect(maps.Keys(r.procs))
	r.mu.Unlock()
	for _, id := range ids {
		r.stop(id)
	}
}

// stop stops the replica id (SIGTERM; SIGKILL after a minute): it closes
// its fleet, which releases its Lease.
func (r *run) stop(id string) {
	r.mu.Lock()
	p := r.procs[id]
	delete(r.procs, id)
	r.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		r.failures = append(r.failures, fmt.Errorf("replica %s did not stop within a minute of SIGTERM", id))
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.proxy.Close()
}

// waitForStats waits until the replica id has written n stats lines more.
func (r *run) waitForStats(id string, n int) error {
	want := r.countOf(id, "stats") + n
	deadline := time.Now().Add(hang)
	for r.countOf(id, "stats") < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s wrote no stats for %v", id, hang)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// countOf is how many events of kind ev the replica id wrote so far.
func (r *run) countOf(id, ev string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.replica == id && e.Ev == ev {
			n++
		}
	}
	return n
}

// sinceStart is how long after the first of ids' processes started the
// last cluster any of them owns now was taken.
func (r *run) sinceStart(ids ...string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first, last int64
	for _, e := range r.events {
		if !slices.Contains(ids, e.replica) {
			continue
		}
		switch e.Ev {
		case "start":
			if first == 0 || e.T < first {
				first = e.T
			}
		case "add":
			last = max(last, e.T)
		}
	}
	return time.Duration(last - first)
}

// count is how many events of kind ev the replicas wrote so far.
func (r *run) count(ev string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Ev == ev {
			n++
		}
	}
	return n
}

// reset forgets the events so far.
func (r *run) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = nil
}

// owners returns each owned cluster's owner, from the events.
func (r *run) owners() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	owners := map[string]string{}
	for _, e := range r.events {
		switch e.Ev {
		case "add":
			owners[e.Cluster] = e.replica
		case "remove":
			if owners[e.Cluster] == e.replica {
				delete(owners, e.Cluster)
			}
		}
	}
	for id := range owners {
		if _, alive := r.procs[owners[id]]; !alive {
			delete(owners, id)
		}
	}
	return owners
}

// waitFor waits until cond holds of the owners.
func (r *run) waitFor(what string, cond func(map[string]string) bool) error {
	deadline := time.Now().Add(hang)
	for !cond(r.owners()) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v", what, hang)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// waitForLogins waits until the replica id has logged in n times.
func (r *run) waitForLogins(id string, n int) error {
	deadline := time.Now().Add(hang)
	for {
		if s := r.stats(id)[id]; s.Logins >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s: not %d logins after %v", id, n, hang)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settle waits until nothing has moved for three RetryPeriods, and for
// two more stats lines of each replica.
func (r *run) settle() {
	quiet := 3 * r.flags.shards.retryPeriod
	for {
		before := r.owners()
		time.Sleep(quiet)
		after := r.owners()
		if len(before) == len(after) && equal(before, after) {
			time.Sleep(2 * time.Second)
			return
		}
	}
}

// stats returns the last stats line of each replica named.
func (r *run) stats(ids ...string) map[string]event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]event{}
	for _, e := range r.events {
		for _, id := range ids {
			if e.replica == id && e.Ev == "stats" {
				out[id] = e.event
			}
		}
	}
	return out
}

// countLeaseWrites watches the Leases' namespace from now on; the function
// it returns counts the writes of the next window, per second.
func (r *run) countLeaseWrites(ctx context.Context) func(window time.Duration) float64 {
	return func(window time.Duration) float64 {
		ctx, cancel := context.WithTimeout(ctx, window)
		defer cancel()
		w, err := r.admin.CoordinationV1().Leases(r.leases).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			r.failures = append(r.failures, err)
			return 0
		}
		defer w.Stop()
		start := time.Now()
		n := 0
		for ev := range w.ResultChan() {
			if ev.Type == watch.Modified || (ev.Type == watch.Added && time.Since(start) > time.Second) {
				n++
			}
		}
		return float64(n) / time.Since(start).Seconds()
	}
}

func countOf(owners map[string]string, id string) int {
	n := 0
	for _, o := range owners {
		if o == id {
			n++
		}
	}
	return n
}

func equal(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
