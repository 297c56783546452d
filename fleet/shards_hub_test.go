package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/fleet/internal/shard"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// The sharding protocol against an in-memory hub of Leases, fast enough to
// run its races many times: the integration suite runs it against a real
// API server (integration/shards_test.go). These cases came from a review
// of the protocol, each a way to two owners or an orphan.

// leaseHub is an in-memory API server for Leases: resourceVersions bump on
// every write, Update and Delete honour them, List is a consistent read,
// and finalizers hold a deleted Lease as the API server does (marked; gone
// once an update takes the last one off; none added to a marked one).
type leaseHub struct {
	mu     sync.Mutex
	rv     int
	leases map[string]*coordinationv1.Lease
}

var leaseGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// hubClient is one replica's connection to the hub: down fails every call,
// noList fails List only (e.g. RBAC without list).
type hubClient struct {
	coordinationv1client.LeaseInterface // unused methods: nil
	hub                                 *leaseHub
	down, noList                        atomic.Bool
}

var errDown = errors.New("hub unreachable")

func (c *hubClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	if c.down.Load() {
		return nil, errDown
	}
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	l := c.hub.leases[name]
	if l == nil {
		return nil, apierrors.NewNotFound(leaseGR, name)
	}
	return l.DeepCopy(), nil
}

func (c *hubClient) Create(_ context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if c.down.Load() {
		return nil, errDown
	}
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	if c.hub.leases[l.Name] != nil {
		return nil, apierrors.NewAlreadyExists(leaseGR, l.Name)
	}
	c.hub.rv++
	l = l.DeepCopy()
	l.ResourceVersion = strconv.Itoa(c.hub.rv)
	l.UID = types.UID("uid-" + l.ResourceVersion)
	c.hub.leases[l.Name] = l
	return l.DeepCopy(), nil
}

func (c *hubClient) Update(_ context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if c.down.Load() {
		return nil, errDown
	}
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	cur := c.hub.leases[l.Name]
	if cur == nil {
		return nil, apierrors.NewNotFound(leaseGR, l.Name)
	}
	if cur.ResourceVersion != l.ResourceVersion {
		return nil, apierrors.NewConflict(leaseGR, l.Name, errors.New("changed"))
	}
	if cur.DeletionTimestamp != nil && len(l.Finalizers) > len(cur.Finalizers) {
		return nil, apierrors.NewForbidden(leaseGR, l.Name, errors.New("no new finalizers can be added if the object is being deleted"))
	}
	c.hub.rv++
	l = l.DeepCopy()
	l.DeletionTimestamp = cur.DeletionTimestamp
	l.ResourceVersion = strconv.Itoa(c.hub.rv)
	if l.DeletionTimestamp != nil && len(l.Finalizers) == 0 {
		delete(c.hub.leases, l.Name)
		return l, nil
	}
	c.hub.leases[l.Name] = l
	return l.DeepCopy(), nil
}

func (c *hubClient) Delete(_ context.Context, name string, o metav1.DeleteOptions) error {
	if c.down.Load() {
		return errDown
	}
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	cur := c.hub.leases[name]
	if cur == nil {
		return apierrors.NewNotFound(leaseGR, name)
	}
	if o.Preconditions != nil && o.Preconditions.ResourceVersion != nil && *o.Preconditions.ResourceVersion != cur.ResourceVersion {
		return apierrors.NewConflict(leaseGR, name, errors.New("changed"))
	}
	c.hub.deleteLocked(name)
	return nil
}

// deleteLocked deletes the Lease name as the API server does: marks it
// while it has finalizers.
func (h *leaseHub) deleteLocked(name string) {
	cur := h.leases[name]
	if len(cur.Finalizers) == 0 {
		delete(h.leases, name)
		return
	}
	if cur.DeletionTimestamp == nil {
		h.rv++
		cur.ResourceVersion = strconv.Itoa(h.rv)
		cur.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
}

func (c *hubClient) List(_ context.Context, o metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if c.down.Load() || c.noList.Load() {
		return nil, errDown
	}
	sel, err := labels.Parse(o.LabelSelector)
	if err != nil {
		return nil, err
	}
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	list := &coordinationv1.LeaseList{}
	for _, l := range c.hub.leases {
		if sel.Matches(labels.Set(l.Labels)) {
			list.Items = append(list.Items, *l.DeepCopy())
		}
	}
	return list, nil
}

// Watch never reports: the loop runs on its timer alone.
func (c *hubClient) Watch(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	go func() { <-ctx.Done(); w.Stop() }()
	return w, nil
}

// shardedOnHub is a fleet sharded on hub through its own client; alive
// counts, per cluster, the OnAdd contexts not yet ended, across fleets.
func shardedOnHub(t *testing.T, c *hubClient, identity string, alive *sync.Map, also ...func(context.Context, *Member)) *Fleet {
	t.Helper()
	return shardedWith(t, c, identity, alive, hubDurations, nil, also...)
}

// hubDurations are the hub tests' Shards durations.
var hubDurations = Shards{RetryPeriod: 50 * time.Millisecond, RenewDeadline: 300 * time.Millisecond, LeaseDuration: time.Second}

// shardedWith is shardedOnHub with the durations of durations and
// onRemove as the fleet's OnRemove.
func shardedWith(t *testing.T, c *hubClient, identity string, alive *sync.Map, durations Shards, onRemove func(*Member), also ...func(context.Context, *Member)) *Fleet {
	t.Helper()
	f := New(Options{OnAdd: countAlive(alive, also...), OnRemove: onRemove})
	shardOnWith(t, f, c, identity, durations)
	return f
}

// countAlive is an OnAdd that counts, per cluster in alive, the contexts
// not yet ended, then calls also.
func countAlive(alive *sync.Map, also ...func(context.Context, *Member)) func(context.Context, *Member) {
	return func(ctx context.Context, m *Member) {
		n, _ := alive.LoadOrStore(m.Name(), new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		context.AfterFunc(ctx, func() { n.(*atomic.Int32).Add(-1) })
		for _, g := range also {
			g(ctx, m)
		}
	}
}

// shardOn shards f through leases as identity, with the hub tests'
// durations, until the test ends.
func shardOn(t *testing.T, f *Fleet, leases coordinationv1client.LeaseInterface, identity string) {
	t.Helper()
	shardOnWith(t, f, leases, identity, hubDurations)
}

// shardOnWith is shardOn with the durations of durations.
func shardOnWith(t *testing.T, f *Fleet, leases coordinationv1client.LeaseInterface, identity string, durations Shards) {
	t.Helper()
	sh, err := Shards{Config: &rest.Config{}, Namespace: "ns", Group: "g", Identity: identity,
		RetryPeriod: durations.RetryPeriod, RenewDeadline: durations.RenewDeadline, LeaseDuration: durations.LeaseDuration}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	f.shards = shard.New(sh.config(f.opts.Logger, f.opts.Registerer), leases, shardHost{f}, clock.RealClock{})
	f.shards.Start()
	t.Cleanup(f.Close)
}

func never(context.Context) (*login.ConnectionInfo, error) { return nil, errors.New("not called") }

// watchOwners polls alive for at least d, then until every cluster of
// names has an owner (or testwait.Hang has passed), and returns the most
// owners any cluster had at once, and the clusters without an owner at
// the end.
func watchOwners(alive *sync.Map, names []string, d time.Duration) (most int32, orphans []string) {
	orphaned := func() []string {
		var out []string
		for _, n := range names {
			if v, ok := alive.Load(n); !ok || v.(*atomic.Int32).Load() == 0 {
				out = append(out, n)
			}
		}
		return out
	}
	start := time.Now()
	for {
		alive.Range(func(_, v any) bool { most = max(most, v.(*atomic.Int32).Load()); return true })
		orphans = orphaned()
		if since := time.Since(start); since >= d && (len(orphans) == 0 || since >= testwait.Hang) {
			return most, orphans
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func clusterNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ns/c%02d", i)
	}
	return names
}

// Two replicas of distinct identities share the clusters, one owner each.
func TestShardsTwoReplicasShareWithOneOwnerEach(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	names := clusterNames(20)
	for _, id := range []string{"a", "b"} {
		f := shardedOnHub(t, &hubClient{hub: hub}, id, &alive)
		for _, n := range names {
			if err := f.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
	}
	if most, orphans := watchOwners(&alive, names, 2*time.Second); most > 1 || len(orphans) > 0 {
		t.Errorf("most owners at once %d, orphans %v", most, orphans)
	}
}

// Two processes of one Identity (the default host name under hostNetwork,
// or two runs on one machine) share one Lease: the second waits until the
// first's writes stop, and never owns a cluster while it runs.
func TestShardsDuplicateIdentityNeverGivesTwoOwners(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	names := clusterNames(5)
	for range 2 {
		f := shardedOnHub(t, &hubClient{hub: hub}, "same-host", &alive)
		for _, n := range names {
			if err := f.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
	}
	if most, _ := watchOwners(&alive, names, 2*time.Second); most > 1 {
		t.Errorf("a cluster had %d owners at once under one identity", most)
	}
}

// A Lease deleted by someone else (kubectl, a namespace cleanup) while its
// replica holds its clusters counts as one written again at the list that
// missed it: its peers take nothing for its LeaseDuration, by when the
// replica has given its clusters up (here it cannot reach the hub, so it
// cannot write it again).
func TestShardsDeletedLeaseOfALiveReplicaGivesNoSecondOwner(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	names := clusterNames(20)
	ca := &hubClient{hub: hub}
	for id, c := range map[string]*hubClient{"a": ca, "b": {hub: hub}} {
		f := shardedOnHub(t, c, id, &alive)
		for _, n := range names {
			if err := f.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
	}
	if most, orphans := watchOwners(&alive, names, 1500*time.Millisecond); most > 1 || len(orphans) > 0 {
		t.Fatalf("before: most owners %d, orphans %v", most, orphans)
	}
	ca.down.Store(true) // a keeps its clusters until RenewDeadline
	if err := (&hubClient{hub: hub}).Delete(context.Background(), shard.LeaseName("g", "a"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if most, _ := watchOwners(&alive, names, time.Second); most > 1 {
		t.Errorf("a cluster had %d owners at once after a live replica's Lease was deleted", most)
	}
}

// A replica that could renew its Lease but cannot list the others' (RBAC
// without list, or its loop held up) stops renewing, so that its peers
// take its share: no cluster stays without an owner.
func TestShardsAReplicaThatCannotListLeavesNoOrphans(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	names := clusterNames(20)
	cb := &hubClient{hub: hub}
	cb.noList.Store(true)
	for id, c := range map[string]*hubClient{"a": {hub: hub}, "b": cb} {
		f := shardedOnHub(t, c, id, &alive)
		for _, n := range names {
			if err := f.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, orphans := watchOwners(&alive, names, 3*time.Second); len(orphans) > 0 {
		t.Errorf("clusters owned by no replica: %v", orphans)
	}
}

// OnAdd may remove its own cluster (one it finds unusable): no lock of the
// fleet's is held while it runs.
func TestShardsOnAddMayRemoveItsOwnCluster(t *testing.T) {
	var f *Fleet
	f = New(Options{OnAdd: func(_ context.Context, m *Member) { f.Remove(m.Name()) }})
	defer func() { go f.Close() }()
	done := make(chan struct{})
	go func() { _ = f.Add("a", never); close(done) }()
	select {
	case <-done:
	case <-time.After(testwait.Hang):
		t.Fatal("Add is stuck: OnAdd's Remove waits on a lock OnAdd holds")
	}
}

// A replica gives a cluster up, its vault closed, before its peer may take
// it: a handler that ignores its context never runs on two replicas at
// once.
func TestShardsOldOwnersVaultHasClosedBeforeTheNewOwnerLogsIn(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	names := clusterNames(20)
	var mu sync.Mutex
	inflight, most := map[string]int{}, 0
	handler := func(name string) login.Handler {
		return func(context.Context) (*login.ConnectionInfo, error) {
			mu.Lock()
			inflight[name]++
			most = max(most, inflight[name])
			mu.Unlock()
			time.Sleep(800 * time.Millisecond) // a plugin that ignores its context
			mu.Lock()
			inflight[name]--
			mu.Unlock()
			return nil, errors.New("no credential")
		}
	}
	start := func(id string) {
		f := shardedOnHub(t, &hubClient{hub: hub}, id, &alive, func(ctx context.Context, m *Member) { go m.RESTConfig(ctx) })
		for _, n := range names {
			if err := f.Add(n, handler(n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	start("a")
	time.Sleep(300 * time.Millisecond) // a owns and logs in to every cluster
	start("b")                         // b takes about half while a's handlers run
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if most > 1 {
		t.Errorf("a cluster's handler ran on two replicas at once")
	}
	if m, _ := watchOwners(&alive, names, 0); m > 1 {
		t.Errorf("two members at once")
	}
}

// A batch of OnAdds longer than RenewDeadline (each short: 40 ms, 20
// clusters, RenewDeadline 300 ms) is progress, not a loop stuck: the
// replica keeps renewing its Lease and its clusters, and takes each once.
func TestShardsSlowOnAddBatchDoesNotFenceAHealthyReplica(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	var adds atomic.Int32
	names := clusterNames(20)
	f := shardedOnHub(t, &hubClient{hub: hub}, "a", &alive, func(ctx context.Context, m *Member) {
		adds.Add(1)
		time.Sleep(40 * time.Millisecond)
	})
	for _, n := range names {
		if err := f.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	if n := adds.Load(); n > int32(len(names)) {
		t.Errorf("%d OnAdds in 3 s for %d clusters: the replica gives its clusters up and takes them again", n, len(names))
	}
}

// Two processes of one identity, and someone deletes their Lease: the one
// waiting on the other's writes does not take the Lease's absence for the
// other's end, and never owns a cluster the first still holds.
func TestShardsDuplicateIdentityAndDeletedLeaseNeverGiveTwoOwners(t *testing.T) {
	for i := range 5 {
		hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
		var alive sync.Map
		names := clusterNames(5)
		f1 := shardedOnHub(t, &hubClient{hub: hub}, "same-host", &alive)
		for _, n := range names {
			if err := f1.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
		if _, orphans := watchOwners(&alive, names, 300*time.Millisecond); len(orphans) > 0 {
			t.Fatalf("first process: orphans %v", orphans)
		}
		f2 := shardedOnHub(t, &hubClient{hub: hub}, "same-host", &alive)
		for _, n := range names {
			if err := f2.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond) // the second waits on the first's Lease
		_ = (&hubClient{hub: hub}).Delete(context.Background(), shard.LeaseName("g", "same-host"), metav1.DeleteOptions{})
		if most, _ := watchOwners(&alive, names, time.Second); most > 1 {
			t.Fatalf("run %d: a cluster had %d owners at once", i, most)
		}
		f1.Close()
		f2.Close()
	}
}

// A fence during a short outage gives the clusters up, one OnRemove after
// another; the loop takes them again once the hub answers, and only once
// every OnRemove has returned: a cluster's next OnAdd comes after its last
// OnRemove.
func TestShardsFenceOnRemoveReturnsBeforeTheNextOnAdd(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	c := &hubClient{hub: hub}
	var mu sync.Mutex
	live := map[string]int{} // OnAdd +1, OnRemove -1, by name
	most := 0
	f := New(Options{
		OnAdd: func(_ context.Context, m *Member) {
			mu.Lock()
			live[m.Name()]++
			most = max(most, live[m.Name()])
			mu.Unlock()
		},
		OnRemove: func(m *Member) {
			time.Sleep(150 * time.Millisecond) // waits briefly for its controllers
			mu.Lock()
			live[m.Name()]--
			mu.Unlock()
		},
	})
	shardOn(t, f, c, "a")
	for _, n := range clusterNames(8) {
		if err := f.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	c.down.Store(true)
	time.Sleep(400 * time.Millisecond) // past RenewDeadline: fenced
	c.down.Store(false)
	time.Sleep(2 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if most > 1 {
		t.Errorf("a cluster's OnAdd ran before the OnRemove of its previous member returned (%d at once)", most)
	}
}

// What a person reads of a sharded fleet says what happened and who owns
// what: each replica's Lease carries its identity and how many clusters it
// owns as labels (its name is a hash), the counts add up to the fleet,
// the V(1) line "cluster taken" names each cluster's owner, no replica
// calls itself a peer, and "took clusters" leaves out what did not happen
// (before: "moved":0,"from":{} beside the peer's "gave clusters up").
func TestShardsSayWhoOwnsWhat(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	names := clusterNames(20)
	logs := map[string]*testlog.Buffer{}
	for _, id := range []string{"replica-a", "replica-b"} {
		buf := &testlog.Buffer{}
		logs[id] = buf
		f := New(Options{Logger: buf.Logger(1), OnAdd: func(ctx context.Context, m *Member) {
			n, _ := alive.LoadOrStore(m.Name(), new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			context.AfterFunc(ctx, func() { n.(*atomic.Int32).Add(-1) })
		}})
		shardOn(t, f, &hubClient{hub: hub}, id)
		for _, n := range names {
			if err := f.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
	}
	if most, orphans := watchOwners(&alive, names, time.Second); most > 1 || len(orphans) > 0 {
		t.Fatalf("most owners at once %d, orphans %v", most, orphans)
	}
	counts := func() map[string]string {
		hub.mu.Lock()
		defer hub.mu.Unlock()
		out := map[string]string{}
		for _, l := range hub.leases {
			out[l.Labels[shard.ReplicaLabel]] = l.Labels[shard.ClustersLabel]
		}
		return out
	}
	testwait.For(t, "the Leases' labels to count every cluster once", func() bool {
		c := counts()
		a, errA := strconv.Atoi(c["replica-a"])
		b, errB := strconv.Atoi(c["replica-b"])
		return len(c) == 2 && errA == nil && errB == nil && a+b == len(names) && a > 0 && b > 0
	})

	taken := 0
	for id, buf := range logs {
		for _, line := range strings.Split(buf.String(), "\n") {
			switch {
			case strings.Contains(line, `"peer"="`+id+`"`):
				t.Errorf("%s names itself as a peer: %s", id, line)
			case strings.Contains(line, `"msg"="took clusters"`) && (strings.Contains(strings.Replace(line, `"level"=0`, "", 1), "=0") || strings.Contains(line, "={}")):
				t.Errorf("%s logs what did not happen: %s", id, line)
			case strings.Contains(line, `"msg"="cluster taken"`):
				taken++
			}
		}
	}
	if taken < len(names) {
		t.Errorf("%d \"cluster taken\" lines, want one at least for each of the %d clusters", taken, len(names))
	}
}

// A sharded fleet of members with no stored credential mints each
// member's tokens on its owner only: the other replica never logs in for
// it, so the hub sees one replica per member.
func TestShardsMintOnlyOnTheOwner(t *testing.T) {
	hub := newMintLog(t, time.Hour)
	member, memberCA := newVersionServer(t)
	leases := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive, owners sync.Map
	names := clusterNames(12)
	for _, id := range []string{"a", "b"} {
		// Durations ten times the other tests': the replicas start within
		// a RetryPeriod of each other even on a loaded machine, so that
		// each member is taken once, by its owner, as in a rollout.
		f := shardedWith(t, &hubClient{hub: leases}, id, &alive, Shards{RetryPeriod: 500 * time.Millisecond, RenewDeadline: 3 * time.Second, LeaseDuration: 10 * time.Second}, nil,
			func(ctx context.Context, m *Member) {
				owners.Store(m.Name(), id)
				go func() { _, _ = m.RESTConfig(ctx) }() // logs in, as what OnAdd starts would
			})
		for _, n := range names {
			if err := f.Add(n, federation.Login(federation.Config{
				Hub: hub.configFor("replica-" + id), Namespace: "fleet", ServiceAccount: "op", Audiences: []string{n},
				Member: federation.Member{Server: member.URL, CAData: memberCA},
			})); err != nil {
				t.Fatal(err)
			}
		}
	}
	if most, orphans := watchOwners(&alive, names, time.Second); most > 1 || len(orphans) > 0 {
		t.Fatalf("most owners at once %d, orphans %v", most, orphans)
	}
	testwait.For(t, "every member's first mint", func() bool { return len(hub.callers()) == len(names) })
	for _, n := range names {
		owner, _ := owners.Load(n)
		callers := hub.callers()[n]
		if len(callers) != 1 || callers["replica-"+owner.(string)] == 0 {
			t.Errorf("%s (owned by %v) was minted for by %v, want its owner alone", n, owner, callers)
		}
	}
}
