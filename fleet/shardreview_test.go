package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

func coreOf(id string) *shardCore {
	cfg := Shards{Identity: id, LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
	return newShardCore(cfg)
}

// A write that fails at once (hub refuses: RBAC, webhook, a duplicate
// identity's Lease found by the Get) must be retried after RetryPeriod,
// not at once: the log line says "retrying every RetryPeriod".
func TestShardCoreRetriesAFailedWriteAfterRetryPeriod(t *testing.T) {
	c := coreOf("a")
	now := modelEpoch
	var e shardEffects
	c.step(now, &e)
	if e.write == nil {
		t.Fatal("first step wrote nothing")
	}
	writes := 1
	for i := range 50 {
		at := now.Add(time.Duration(i+1) * time.Millisecond) // each failure answers within 1 ms
		content := *e.write
		e = shardEffects{}
		c.wrote(content, writeResult{start: at.Add(-time.Millisecond), end: at}, &e)
		c.step(at, &e)
		if e.write == nil {
			break
		}
		writes++
	}
	if writes > 2 {
		t.Errorf("%d writes within 50 ms after writes that fail at once (RetryPeriod 100 ms): a busy loop against the hub", writes)
	}
}

// countingHub counts the writes' requests (Get, Create, Update).
type countingHub struct {
	*hubClient
	calls atomic.Int64
}

func (c *countingHub) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	c.calls.Add(1)
	return c.hubClient.Get(ctx, name, o)
}

func (c *countingHub) Create(ctx context.Context, l *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	c.calls.Add(1)
	return c.hubClient.Create(ctx, l, o)
}

func (c *countingHub) Update(ctx context.Context, l *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	c.calls.Add(1)
	return c.hubClient.Update(ctx, l, o)
}

// A hub that refuses every write at once (down here: errDown at once, as a
// 403 or a refused connection) is asked again every RetryPeriod, not in a
// loop: RetryPeriod 50 ms, so about 10 writes in 500 ms.
func TestShardsFailingWritesRetryEveryRetryPeriod(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	c := &countingHub{hubClient: &hubClient{hub: hub}}
	c.down.Store(true)
	f := New(Options{})
	shardOn(t, f, c, "a")
	time.Sleep(500 * time.Millisecond)
	if n := c.calls.Load(); n > 40 {
		t.Errorf("%d write requests in 500 ms against a hub that refuses them (RetryPeriod 50 ms): a busy loop", n)
	}
}

// Two processes of one identity: the second, waiting LeaseDuration on the
// first's Lease, reads it every RetryPeriod, not in a loop.
func TestShardsDuplicateIdentityWaitsWithoutSpinning(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	first := shardedOnHub(t, &hubClient{hub: hub}, "same-host", &alive)
	if err := first.Add("ns/c00", never); err != nil {
		t.Fatal(err)
	}
	if _, orphans := watchOwners(&alive, []string{"ns/c00"}, 0); len(orphans) > 0 {
		t.Fatal("the first process took nothing")
	}
	c := &countingHub{hubClient: &hubClient{hub: hub}}
	f := New(Options{})
	shardOn(t, f, c, "same-host")
	time.Sleep(500 * time.Millisecond)
	t.Logf("%d calls", c.calls.Load())
	if n := c.calls.Load(); n > 40 {
		t.Errorf("%d Lease requests in 500 ms while waiting on another process's Lease (RetryPeriod 50 ms): a busy loop", n)
	}
}

// The cluster x leaves the fleet and comes back (Remove and Add, or a
// Secret's source change: detach, then add) while the loop is between its
// step, which took x, and members(), which gives the take to the seat of
// that name it finds: the new seat. Then seatGone (posted by the Remove)
// moves the core's take to retiring, and the core no longer counts x as
// owned, while the fleet holds its member. A fence gives up only what the
// core owns: x's member outlives it, and a peer takes x beside it.
func TestShardsRemoveAndAddDuringATakeLeaveNoMemberTheFenceMisses(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	ca := &hubClient{hub: hub}
	a := shardedOnHub(t, ca, "a", &alive)
	if err := a.Add("ns/y", never); err != nil {
		t.Fatal(err)
	}
	if _, orphans := watchOwners(&alive, []string{"ns/y"}, 0); len(orphans) > 0 {
		t.Fatal("a took nothing")
	}
	const x = "ns/x"
	a.mu.Lock()
	a.seats++
	first := &seat{name: x, serial: a.seats, source: addSource, handler: never}
	a.clusters[x] = first
	a.shards.seatAdded(first)          // what Add does under the lock
	time.Sleep(100 * time.Millisecond) // the loop has stepped (take x) and waits on a.mu in members()
	a.detachLocked(first, &leftError{name: x, reason: "removed with Fleet.Remove"})
	a.seats++
	second := &seat{name: x, serial: a.seats, source: addSource, handler: never} // Add again
	a.clusters[x] = second
	a.shards.seatAdded(second)
	a.mu.Unlock()
	if _, orphans := watchOwners(&alive, []string{x}, 0); len(orphans) > 0 {
		t.Fatal("a did not take x")
	}
	ca.down.Store(true) // a fences after RenewDeadline (300 ms)
	b := shardedOnHub(t, &hubClient{hub: hub}, "b", &alive)
	for _, n := range []string{x, "ns/y"} {
		if err := b.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	if most, _ := watchOwners(&alive, []string{x, "ns/y"}, 3*time.Second); most > 1 {
		t.Errorf("a cluster had %d owners at once: a's member of %s outlived its fence", most, x)
	}
	if v, _ := alive.Load(x); v.(*atomic.Int32).Load() > 1 {
		t.Errorf("%s has %d owners now", x, v.(*atomic.Int32).Load())
	}
}

// Fleet.Remove of a cluster whose login ignores its context waits in the
// vault's Close; Fleet.Close meanwhile (safe for concurrent use) must
// release the Lease only once that vault has closed too, not only its own
// members' vaults: a peer that still sees the cluster would take it while
// this replica's handler runs.
func TestShardsCloseReleasesOnlyOnceAConcurrentRemovesVaultHasClosed(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	names := clusterNames(20)
	var x string
	for _, n := range names {
		if ownerOf([]string{"a", "b"}, n) == "a" {
			x = n
			break
		}
	}
	started := make(chan struct{}, 1)
	// aLogging counts a's logins of x under way: b must not take x while
	// one runs (what a vault's Close waits for). It is the handler's own
	// count, not Remove's return, which a busy machine may schedule after
	// b's take.
	var aLogging atomic.Int32
	var twice, armed atomic.Bool
	handler := func(replica, name string) login.Handler {
		return func(context.Context) (*login.ConnectionInfo, error) {
			if name == x && replica == "a" {
				aLogging.Add(1)
				defer aLogging.Add(-1)
				select {
				case started <- struct{}{}:
				default:
				}
				time.Sleep(1500 * time.Millisecond) // a plugin that ignores its context
			}
			return nil, errors.New("no credential")
		}
	}
	a := shardedOnHub(t, &hubClient{hub: hub}, "a", &alive, func(ctx context.Context, m *Member) {
		if m.Name() == x {
			go m.RESTConfig(ctx)
		}
	})
	b := shardedOnHub(t, &hubClient{hub: hub}, "b", &alive, func(ctx context.Context, m *Member) {
		if armed.Load() && m.Name() == x && aLogging.Load() > 0 {
			twice.Store(true)
		}
	})
	for replica, f := range map[string]*Fleet{"a": a, "b": b} {
		for _, n := range names {
			if err := f.Add(n, handler(replica, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if most, orphans := watchOwners(&alive, names, 2*time.Second); len(orphans) > 0 || most > 1 {
		t.Fatalf("orphans %v, most owners %d", orphans, most)
	}
	armed.Store(true) // from now on, x is a's
	select {
	case <-started: // perhaps a login that has ended: wait for the next
	default:
	}
	select {
	case <-started:
	case <-time.After(testwait.Hang):
		t.Fatal("a's login of x did not start")
	}
	removed := make(chan struct{})
	go func() { a.Remove(x); close(removed) }()
	time.Sleep(50 * time.Millisecond) // Remove waits in x's vault's Close, on most runs
	a.Close()
	<-removed
	time.Sleep(time.Second)
	if twice.Load() {
		t.Errorf("b took %s while a's login of it ran (a's vault had not closed)", x)
	}
}

// soloRun drives c alone on a hub that answers every request in 1 ms,
// from *now for d, the hub holding others (peers' Leases) besides c's own;
// it returns the clusters c took.
func soloRun(c *shardCore, now *time.Time, d time.Duration, others func() []leaseRecord) []string {
	var took []string
	end := now.Add(d)
	uid := "uid-a"
	for now.Before(end) {
		var e shardEffects
		c.step(*now, &e)
		for _, t := range e.takes {
			took = append(took, t.name)
		}
		at := *now
		*now = now.Add(time.Millisecond)
		if e.write != nil {
			var e2 shardEffects
			c.wrote(*e.write, writeResult{start: at, end: *now, ok: true, uid: uid}, &e2)
		}
		if e.list {
			var e2 shardEffects
			c.listed(at, *now, others(), &e2)
		}
		if e.write == nil && !e.list {
			*now = now.Add(9 * time.Millisecond)
		}
	}
	return took
}

// A peer's Lease says its duration, and the core believes any: a Lease
// with "1000h" in its lease-duration annotation (a misconfigured replica,
// or garbage), of an older release (no finalizer), released and then
// deleted, would hold up every take of this replica for 1000 h ("the Lease
// of replica z is gone from the hub").
func TestShardCoreBoundsAPeersDuration(t *testing.T) {
	c := coreOf("a")
	c.seatAdded("ns/c00", 1)
	now := modelEpoch
	bogus := leaseRecord{name: "g-bogus", holder: "z", rv: "1", view: []string{}, readable: true, released: true, rules: coreRules, duration: 1000 * time.Hour}
	present := true
	others := func() []leaseRecord {
		if present {
			return []leaseRecord{bogus}
		}
		return nil
	}
	soloRun(c, &now, 100*time.Millisecond, others)
	present = false // deleted by someone
	within := maxPeerDuration(c.ld) + c.settle + time.Second
	took := soloRun(c, &now, within, others)
	if len(took) == 0 {
		t.Errorf("alone, with every request answered, this replica took nothing in %v (LeaseDuration 1 s): %s", within, c.cannotTake(now))
	}
}

// record never panics on a peer's garbage, and reads it as unreadable.
func TestShardsRecordOfGarbageNeverPanics(t *testing.T) {
	s := &sharding{lease: leaseName("g", "self"), cfg: Shards{Group: "g"}}
	for _, tc := range []struct {
		ann      map[string]string
		readable bool
	}{
		{map[string]string{viewAnnotation: "{"}, false},
		{map[string]string{viewAnnotation: `{"a":1}`}, false},
		{map[string]string{viewAnnotation: `[1,2]`}, false},
		{map[string]string{viewAnnotation: `null`}, true},
		{map[string]string{viewAnnotation: `[]`, rulesAnnotation: "x"}, false},
		{map[string]string{viewAnnotation: `[]`, rulesAnnotation: "-3"}, false},
		{map[string]string{viewAnnotation: `[]`, durationAnnotation: "-5s"}, true},
		{map[string]string{viewAnnotation: `[]`, durationAnnotation: "99999999999h"}, true},
		{map[string]string{viewAnnotation: "\xff\xfe"}, false},
		{map[string]string{incarnationAnnotation: "x"}, false}, // its view taken off by hand: it may claim anything
	} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName("g", "x"), Annotations: tc.ann}}
		r, ok := s.record(l)
		if !ok || r.readable != tc.readable || r.duration < 0 {
			t.Errorf("%q: ok %v readable %v (want %v) duration %v", tc.ann, ok, r.readable, tc.readable, r.duration)
		}
	}
	for _, name := range []string{leaseName("g", "self"), "g-x", leaseName("g-old", "x"), "g-0123456789ABCDEF", "other-0123456789abcdef"} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{viewAnnotation: "[]"}}}
		if _, ok := s.record(l); ok {
			t.Errorf("the Lease %s is read as a peer's of group g", name)
		}
	}
}

type countingLists struct {
	*hubClient
	lists atomic.Int64
}

func (c *countingLists) List(ctx context.Context, o metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	c.lists.Add(1)
	return c.hubClient.List(ctx, o)
}

// A hub that refuses every list, with a peer's Lease due to expire: the
// list at its expiry is tried once, then every half RetryPeriod, not again
// at once after each failure.
func TestShardsFailingListsRetryEveryHalfRetryPeriod(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	shardedOnHub(t, &hubClient{hub: hub}, "b", &alive)
	c := &countingLists{hubClient: &hubClient{hub: hub}}
	f := New(Options{})
	shardOn(t, f, c, "a")
	time.Sleep(300 * time.Millisecond) // a has listed b's Lease
	c.noList.Store(true)
	before := c.lists.Load()
	time.Sleep(1500 * time.Millisecond) // past b's LeaseDuration (1 s)
	if n := c.lists.Load() - before; n > 80 {
		t.Errorf("%d lists in 1.5 s against a hub that refuses them (RetryPeriod 50 ms: about 60): a busy loop", n)
	}
}

// A batch's log line names its clusters, the first ten in order, and counts
// the others: the line at the default level that says who owns a cluster.
func TestShardLogLinesNameTheClustersOfABatch(t *testing.T) {
	members := func(names ...string) []*Member {
		var ms []*Member
		for _, n := range names {
			ms = append(ms, &Member{name: n})
		}
		return ms
	}
	if got := fmt.Sprint(namedIn(members("ns/b", "ns/a"))); got != "[names [ns/a ns/b]]" {
		t.Errorf("two clusters: %s", got)
	}
	many := clusterNames(12)
	slices.Reverse(many)
	got := fmt.Sprint(namedIn(members(many...)))
	if want := fmt.Sprint([]any{"names", clusterNames(10), "more", 2}); got != want {
		t.Errorf("twelve clusters: %s, want %s", got, want)
	}
}
