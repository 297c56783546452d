package fleet

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/authvault/authvault/fleet/internal/shard"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

// released tells whether identity's Lease in hub, which stood before, is
// released: marked so, or deleted, as a clean release ends.
func released(hub *leaseHub, identity string) bool {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	l := hub.leases[shard.LeaseName("g", identity)]
	return l == nil || l.Annotations[shard.ReleasedAnnotation] == "true"
}

// Close's own members' vaults now close in the driver's Go, beside the
// OnRemoves: a login of a's that ignores its context still holds the
// release (and so b's take) up until it returns.
func TestShardsCloseReleasesOnlyOnceItsOwnVaultsHaveClosed(t *testing.T) {
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
				time.Sleep(1500 * time.Millisecond) // ignores its context
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
	armed.Store(true)
	select {
	case <-started:
	default:
	}
	select {
	case <-started:
	case <-time.After(testwait.Hang):
		t.Fatal("a's login of x did not start")
	}
	a.Close()
	if aLogging.Load() > 0 {
		t.Errorf("a's Close returned while its login of %s runs", x)
	}
	testwait.For(t, "b owns "+x, func() bool { return b.Vault(x) != nil })
	if twice.Load() {
		t.Errorf("b took %s while a's login of it ran (a's vault had not closed)", x)
	}
}

// the structural form of the F2 claim, with no speed bound: a's
// Lease is marked released while OnRemoves of clusters that moved away
// earlier still hang (the driver waits for them after its release, not
// before). Waiting for them before it fails this after testwait.Hang,
// whatever the machine.
func TestShardsCloseReleasesWhileAMovedAwayOnRemoveHangs(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	hung := make(chan struct{})
	var closing atomic.Bool
	var hanging atomic.Int32
	a := shardedWithOnRemove(t, &hubClient{hub: hub}, "a", &alive, func(*Member) {
		if closing.Load() {
			return // Close's own: returns at once
		}
		hanging.Add(1)
		<-hung
	})
	unhang := sync.OnceFunc(func() { close(hung) })
	t.Cleanup(unhang)
	names := clusterNames(20)
	for _, n := range names {
		if err := a.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	if _, left := ownedBy(a, &alive, names); len(left) > 0 {
		t.Fatalf("a alone does not own %v", left)
	}
	b := shardedWithOnRemove(t, &hubClient{hub: hub}, "b", &alive, nil)
	t.Cleanup(unhang)
	for _, n := range names {
		if err := b.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "an OnRemove of a cluster moved to b hangs", func() bool { return hanging.Load() > 0 })
	closing.Store(true)
	go a.Close()
	testwait.For(t, "a's Lease released while a moved-away OnRemove hangs", func() bool { return released(hub, "a") })
	if _, left := ownedBy(b, &alive, names); len(left) > 0 {
		t.Fatalf("b does not own %v", left)
	}
}

// two Closes at once. The one that found no member releases the Lease; the
// one that detached the members is held up (here by its Logger, between
// releasing the fleet's mu and starting the vaults' Close) for longer than
// shard.CloseWait. The release then comes while x's vault is open: not
// even closing. A vault of this replica's logs in after its release.
func TestShardsConcurrentCloseReleasesBeforeTheOtherClosesVaults(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var logins atomic.Int32
	var stall sync.Once
	stalling := make(chan struct{})
	sink := funcr.New(func(prefix, args string) {
		if strings.Contains(args, "cluster left the fleet") {
			stall.Do(func() { close(stalling); time.Sleep(shard.CloseWait + time.Second) })
		}
	}, funcr.Options{})
	var mem atomic.Pointer[Member]
	f := New(Options{Logger: logr.Logger(sink), OnAdd: func(_ context.Context, m *Member) { mem.Store(m) }})
	shardOn(t, f, &hubClient{hub: hub}, "a")
	if err := f.Add("ns/x", func(context.Context) (*login.ConnectionInfo, error) {
		logins.Add(1)
		return nil, errors.New("no credential")
	}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "a owns ns/x", func() bool { return mem.Load() != nil })
	m := mem.Load()
	go f.Close() // detaches x, then stalls in its log line
	<-stalling
	f.Close() // finds no member: runs leave, returns after shard.CloseWait
	if !released(hub, "a") {
		t.Fatal("the second Close returned with the Lease not released")
	}
	before := logins.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := m.Vault().Select(ctx) // anything holding the vault: a refresh, a stored *Vault
	if logins.Load() > before {
		t.Errorf("a's vault of ns/x logged in after a's Lease was released (Select: %v)", err)
	}
	testwait.For(t, "x's vault closed", func() bool {
		_, err := m.Vault().Select(context.Background())
		return err != nil && strings.Contains(err.Error(), "closed")
	})
}

// Close is "safe to call more than once", but each later call
// waits shard.HookWait again for the same hung hook of the loop's (an OnAdd
// here; an OnRemove of a cluster that moved away alike): defer f.Close()
// beside a manager's runnable that closes it too makes shutdown 5 s
// longer per call.
func TestShardsSecondCloseDoesNotWaitForHungHooksAgain(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	hung := make(chan struct{})
	var added atomic.Bool
	a := New(Options{OnAdd: func(context.Context, *Member) { added.Store(true); <-hung }})
	unhang := sync.OnceFunc(func() { close(hung) })
	shardOn(t, a, &hubClient{hub: hub}, "a")
	t.Cleanup(unhang)
	if err := a.Add("ns/x", never); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "a's OnAdd of ns/x", added.Load)
	a.Close() // returns after shard.HookWait
	start := time.Now()
	a.Close()
	if d := time.Since(start); d >= shard.HookWait {
		t.Errorf("the second Close took %v: it waited for the hung OnAdd again", d)
	}
}
