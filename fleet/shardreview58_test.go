package fleet

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/authvault/authvault/fleet/internal/shard"
	"github.com/authvault/authvault/testkit/testlog"
)

// Review 58: schedules that break the finalizer protocol's promises.

// review58Fleet is a fleet sharded on hub as identity with durations d,
// logging into buf; adds counts its OnAdds.
func review58Fleet(t *testing.T, hub *leaseHub, identity string, d Shards, buf *testlog.Buffer, alive *sync.Map, adds *atomic.Int32) *Fleet {
	t.Helper()
	return review58FleetOn(t, &hubClient{hub: hub}, identity, d, buf, alive, adds)
}

func review58FleetOn(t *testing.T, leases coordinationv1client.LeaseInterface, identity string, d Shards, buf *testlog.Buffer, alive *sync.Map, adds *atomic.Int32) *Fleet {
	t.Helper()
	f := New(Options{Logger: buf.Logger(0), OnAdd: countAlive(alive, func(context.Context, *Member) { adds.Add(1) })})
	shardOnWith(t, f, leases, identity, d)
	return f
}

func (h *leaseHub) get(name string) *coordinationv1.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.leases[name]; l != nil {
		return l.DeepCopy()
	}
	return nil
}

func (h *leaseHub) version() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rv
}

// R58-1. The Lease is marked (a namespace's deletion, which also stops
// the pods; or kubectl delete lease beside a rollout) after the replica's
// last renewal and before its Close: release updates its stale copy,
// gets a Conflict, and gives up. The Lease keeps the finalizer for good
// (the last replica is gone: the namespace stays Terminating), and with
// peers Close hands over after LeaseDuration, not at once.
func TestShardsReview58CloseRightAfterTheLeaseIsMarkedLetsItGo(t *testing.T) {
	slow := Shards{RetryPeriod: 400 * time.Millisecond, RenewDeadline: 1200 * time.Millisecond, LeaseDuration: 2400 * time.Millisecond}
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	var adds atomic.Int32
	buf := &testlog.Buffer{}
	f := review58Fleet(t, hub, "a", slow, buf, &alive, &adds)
	names := clusterNames(3)
	for _, n := range names {
		if err := f.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	if _, orphans := watchOwners(&alive, names, 2*time.Second); len(orphans) > 0 {
		t.Fatalf("orphans before: %v", orphans)
	}
	name := shard.LeaseName("g", "a")
	// Right after a renewal: the next is a RetryPeriod away.
	rv := hub.get(name).ResourceVersion
	deadline := time.Now().Add(2 * time.Second)
	for hub.get(name).ResourceVersion == rv && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	hub.mu.Lock()
	hub.deleteLocked(name) // the namespace controller's delete
	hub.mu.Unlock()
	f.Close() // the pod's SIGTERM
	if l := hub.get(name); l != nil {
		t.Errorf("after Close, the replica's Lease is still on the hub: marked %v, finalizers %v, released %q\nlog:\n%s",
			l.DeletionTimestamp != nil, l.Finalizers, l.Annotations[shard.ReleasedAnnotation], buf.String())
	}
}

// R58-2. A Lease marked while another finalizer holds it too
// (kubectl delete --cascade=foreground or --cascade=orphan until the
// garbage collector runs, or a policy tool's finalizer): the holder
// writes standby, takes its finalizer off (the Lease stays), then, its
// mark forgotten, writes its share onto the marked Lease at once, sees
// the mark, writes standby, ... a loop with no RetryPeriod between
// writes and two INFO lines a turn, for as long as the other finalizer
// stays (a peer that lists the share-claiming version also moves
// clusters; the last check guards that).
func TestShardsReview58MarkedLeaseHeldByAnotherFinalizerDoesNotSpin(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	var addsA, addsB atomic.Int32
	bufA, bufB := &testlog.Buffer{}, &testlog.Buffer{}
	names := clusterNames(20)
	for _, r := range []struct {
		id   string
		buf  *testlog.Buffer
		adds *atomic.Int32
	}{{"a", bufA, &addsA}, {"b", bufB, &addsB}} {
		f := review58Fleet(t, hub, r.id, hubDurations, r.buf, &alive, r.adds)
		for _, n := range names {
			if err := f.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
	}
	if most, orphans := watchOwners(&alive, names, 1500*time.Millisecond); most > 1 || len(orphans) > 0 {
		t.Fatalf("before: most owners %d, orphans %v", most, orphans)
	}
	name := shard.LeaseName("g", "a")
	hub.mu.Lock()
	l := hub.leases[name]
	l.Finalizers = append(l.Finalizers, "foregroundDeletion")
	hub.rv++
	l.ResourceVersion = strconv.Itoa(hub.rv)
	hub.deleteLocked(name)
	hub.mu.Unlock()
	rv0, b0 := hub.version(), addsB.Load()
	window := time.Second
	time.Sleep(window)
	writes := hub.version() - rv0
	// Two replicas renewing every 50 ms write about 40 times a second;
	// letting one Lease go takes a few more.
	if writes > 100 {
		t.Errorf("%d writes to the hub in %v (two replicas, RetryPeriod %v): a loop without a RetryPeriod between writes", writes, window, hubDurations.RetryPeriod)
	}
	if n := strings.Count(bufA.String(), "this replica claims no share"); n > 10 {
		t.Errorf("a logged %d times in %v that it claims no share", n, window)
	}
	if n := addsB.Load() - b0; n > int32(len(names)) {
		t.Errorf("b took clusters %d times in %v (20 clusters): they flap between a's share and b", n, window)
	}
}

// R58-3. kubectl delete lease on a live replica, the incident action the
// doc names: the replica's next renewal updates its copy, which the mark
// has outdated, and logs at ERROR that it cannot renew its Lease, then
// that "the hub answers again". The hub answered all along.
func TestShardsReview58DeletedLeaseIsNoRenewalError(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	var adds atomic.Int32
	buf := &testlog.Buffer{}
	f := review58Fleet(t, hub, "a", hubDurations, buf, &alive, &adds)
	names := clusterNames(3)
	for _, n := range names {
		if err := f.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	if _, orphans := watchOwners(&alive, names, time.Second); len(orphans) > 0 {
		t.Fatalf("orphans before: %v", orphans)
	}
	if err := (&hubClient{hub: hub}).Delete(context.Background(), shard.LeaseName("g", "a"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "cannot renew this replica's Lease") || strings.Contains(line, "the hub answers again") {
			t.Errorf("a Lease deleted by kubectl logged: %s", line)
		}
	}
}

// slowDeletes is a replica's hub connection whose Deletes take delay, and
// fail without landing when fail is set (the request's context ran out:
// remove's RetryPeriod is shared by the Update and the Delete; or the
// replica restarted between the two).
type slowDeletes struct {
	*hubClient
	delay time.Duration
	fail  bool
}

func (c *slowDeletes) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	time.Sleep(c.delay)
	if c.fail {
		return context.DeadlineExceeded
	}
	return c.hubClient.Delete(ctx, name, o)
}

// R58-5. A peer cleans up the Lease of a replica gone for twice its
// LeaseDuration in two requests: an Update that takes the finalizer off,
// then a Delete. The Update is a new version of that Lease, still
// claiming its holder's share; a list between the two (the loop lists
// beside the delete), or a Delete that never lands, shows the peers a
// live replica again: they put it back in their view and give its share
// up to it, and that share has no owner until the new version expires,
// LeaseDuration later, a second outage 2×LeaseDuration after the first.
func TestShardsReview58PeerCleanupDoesNotReviveTheDeadReplica(t *testing.T) {
	for _, c := range []struct {
		name  string
		delay time.Duration
		fail  bool
	}{{"control: the Delete lands at once", 0, false}, {"the Delete lands 100 ms later", 100 * time.Millisecond, false}, {"the Delete never lands", 0, true}} {
		t.Run(c.name, func(t *testing.T) {
			hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
			var alive sync.Map
			var addsA, addsB atomic.Int32
			names := clusterNames(20)
			ca := &hubClient{hub: hub}
			cb := &slowDeletes{hubClient: &hubClient{hub: hub}, delay: c.delay, fail: c.fail}
			fa := review58FleetOn(t, ca, "a", hubDurations, &testlog.Buffer{}, &alive, &addsA)
			fb := review58FleetOn(t, cb, "b", hubDurations, &testlog.Buffer{}, &alive, &addsB)
			for _, f := range []*Fleet{fa, fb} {
				for _, n := range names {
					if err := f.Add(n, never); err != nil {
						t.Fatal(err)
					}
				}
			}
			if most, orphans := watchOwners(&alive, names, 1500*time.Millisecond); most > 1 || len(orphans) > 0 {
				t.Fatalf("before: most owners %d, orphans %v", most, orphans)
			}
			ca.down.Store(true) // a is cut from the hub for good: as killed, to its peers
			// b takes a's share within LeaseDuration + 2×RetryPeriod and
			// the requests; from then on every cluster stays owned.
			bound := hubDurations.LeaseDuration + 2*hubDurations.RetryPeriod + 200*time.Millisecond
			time.Sleep(bound)
			orphaned := map[string]bool{}
			end := time.Now().Add(3 * hubDurations.LeaseDuration)
			for time.Now().Before(end) {
				for _, n := range names {
					if v, ok := alive.Load(n); !ok || v.(*atomic.Int32).Load() == 0 {
						orphaned[n] = true
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			if len(orphaned) > 0 {
				t.Errorf("%d clusters had no owner again, after b had taken a's share and while b cleaned a's Lease up", len(orphaned))
			}
		})
	}
}

// R58-6. The doc names taking a finalizer off as the one thing a person
// can still do to give a cluster two owners. Relabelling a Lease (kubectl
// label, or an apply that prunes labels and annotations) hid it from the
// group's labelled list just as well, and a Lease of rules 3 gone from a
// list claims nothing: the peer took the holder's share at once, while the
// holder (here cut from the hub right then) kept it until its fence. The
// group's Leases are now listed by name, and one without its view
// annotation claims every cluster.
func TestShardsReview58RelabelledLeaseGivesNoSecondOwner(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	var adds atomic.Int32
	names := clusterNames(20)
	ca := &hubClient{hub: hub}
	for id, c := range map[string]*hubClient{"a": ca, "b": {hub: hub}} {
		f := review58FleetOn(t, c, id, hubDurations, &testlog.Buffer{}, &alive, &adds)
		for _, n := range names {
			if err := f.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
	}
	if most, orphans := watchOwners(&alive, names, 1500*time.Millisecond); most > 1 || len(orphans) > 0 {
		t.Fatalf("before: most owners %d, orphans %v", most, orphans)
	}
	hub.mu.Lock()
	l := hub.leases[shard.LeaseName("g", "a")]
	l.Labels[shard.GroupLabel] = "g-old" // kubectl label lease … fleet.authvault.dev/group=g-old --overwrite
	delete(l.Annotations, shard.ViewAnnotation)
	hub.rv++
	l.ResourceVersion = strconv.Itoa(hub.rv)
	ca.down.Store(true) // and a cannot write it back: it holds its clusters until its fence
	hub.mu.Unlock()
	if most, _ := watchOwners(&alive, names, time.Second); most > 1 {
		t.Errorf("a cluster had %d owners at once after a person relabelled a live replica's Lease", most)
	}
}
