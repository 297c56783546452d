package fleet

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/authvault/authvault/fleet/internal/shard"
	"github.com/authvault/authvault/testkit/testwait"
)

// closeLeaseDuration is the LeaseDuration of the Close tests' replicas,
// long beside the release's handover (tens of milliseconds).
const closeLeaseDuration = 4 * time.Second

// shardedWithOnRemove is shardedOnHub with closeLeaseDuration, and
// onRemove as the fleet's OnRemove.
func shardedWithOnRemove(t *testing.T, c *hubClient, identity string, alive *sync.Map, onRemove func(*Member)) *Fleet {
	t.Helper()
	return shardedWith(t, c, identity, alive,
		Shards{RetryPeriod: 50 * time.Millisecond, RenewDeadline: 2 * time.Second, LeaseDuration: closeLeaseDuration}, onRemove)
}

// ownedBy polls until every cluster of names is owned by f (its Vault is
// not nil) and by no other replica (alive counts one), or testwait.Hang
// passes; it returns how long that took, and the clusters left.
func ownedBy(f *Fleet, alive *sync.Map, names []string) (time.Duration, []string) {
	start := time.Now()
	for {
		var left []string
		for _, n := range names {
			v, ok := alive.Load(n)
			if f.Vault(n) == nil || !ok || v.(*atomic.Int32).Load() != 1 {
				left = append(left, n)
			}
		}
		if len(left) == 0 || time.Since(start) > testwait.Hang {
			return time.Since(start), left
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// F2: Fleet.Close of a replica whose OnRemove is slow, or hangs, hands its
// clusters over at once (its vaults closed, its Lease released), not
// after its Lease expires; and Close returns, whatever the OnRemove does.
func TestShardsCloseHandsOverWhileOnRemoveHangs(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	hung := make(chan struct{})
	var hanging atomic.Int32
	a := shardedWithOnRemove(t, &hubClient{hub: hub}, "a", &alive, func(*Member) {
		hanging.Add(1)
		<-hung // an OnRemove that waits on something that never comes
	})
	b := shardedWithOnRemove(t, &hubClient{hub: hub}, "b", &alive, nil)
	unhang := sync.OnceFunc(func() { close(hung) })
	t.Cleanup(unhang) // before the fleets' Close: cleanups run last first
	names := clusterNames(20)
	for _, f := range []*Fleet{a, b} {
		for _, n := range names {
			if err := f.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each its share, as rendezvous hashing places them.
	shares := map[string][]string{}
	for _, n := range names {
		shares[shard.OwnerOf([]string{"a", "b"}, n)] = append(shares[shard.OwnerOf([]string{"a", "b"}, n)], n)
	}
	for id, f := range map[string]*Fleet{"a": a, "b": b} {
		if _, left := ownedBy(f, &alive, shares[id]); len(left) > 0 {
			t.Fatalf("%s does not own %v of its share", id, left)
		}
	}
	closed := make(chan struct{})
	start := time.Now()
	go func() { a.Close(); close(closed) }()
	// The release, not the Lease's expiry, hands them over: a's Lease is
	// marked released while its OnRemoves hang.
	testwait.For(t, "a's Lease released while its OnRemoves hang", func() bool { return released(hub, "a") })
	took, left := ownedBy(b, &alive, names)
	if len(left) > 0 {
		t.Fatalf("b does not own %v %v after a's Close began", left, took)
	}
	t.Logf("b owned every cluster %v after a's Close began, %d of a's OnRemoves hanging", took, hanging.Load())
	select {
	case <-closed:
		t.Logf("a's Close returned %v after it began", time.Since(start))
	case <-time.After(testwait.Hang):
		t.Errorf("a's Close has not returned %v after it began: it waits on a hung OnRemove", testwait.Hang)
	}
	if hanging.Load() == 0 {
		t.Error("no OnRemove of a's ran: the test proves nothing")
	}
	unhang()
}

// F2: an OnRemove of a cluster that moved away earlier that hangs does not
// hold up the release of the Lease at Close.
func TestShardsCloseReleasesDespiteAHungOnRemoveOfAClusterThatMovedAway(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	hung := make(chan struct{})
	var hanging atomic.Int32
	a := shardedWithOnRemove(t, &hubClient{hub: hub}, "a", &alive, func(*Member) {
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
	t.Cleanup(unhang) // before b's Close too
	for _, n := range names {
		if err := b.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	// b's share moves from a: a's OnRemoves of them hang.
	deadline := time.Now().Add(testwait.Hang)
	for hanging.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if hanging.Load() == 0 {
		t.Fatal("no cluster moved from a to b")
	}
	if most, orphans := watchOwners(&alive, names, 0); len(orphans) > 0 || most > 1 {
		t.Fatalf("after b joined: orphans %v, most owners %d", orphans, most)
	}
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	testwait.For(t, "a's Lease released while OnRemoves hang", func() bool { return released(hub, "a") })
	took, left := ownedBy(b, &alive, names)
	if len(left) > 0 {
		t.Fatalf("b does not own %v %v after a's Close began", left, took)
	}
	select {
	case <-closed:
	case <-time.After(testwait.Hang):
		t.Errorf("a's Close has not returned %v after it began", testwait.Hang)
	}
	unhang()
}
