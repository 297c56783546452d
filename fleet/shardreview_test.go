package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/fleet/internal/shard"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

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
	a.shards.SeatAdded(first.name, first.serial) // what Add does under the lock
	time.Sleep(100 * time.Millisecond)           // the loop has stepped (take x) and waits on a.mu in members()
	a.detachLocked(first, &leftError{name: x, reason: "removed with Fleet.Remove"})
	a.seats++
	second := &seat{name: x, serial: a.seats, source: addSource, handler: never} // Add again
	a.clusters[x] = second
	a.shards.SeatAdded(second.name, second.serial)
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
		if shard.OwnerOf([]string{"a", "b"}, n) == "a" {
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
