package fleet

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/authvault/authvault/fleet/internal/shard"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// A cluster that moves to a peer ends its member's context with a cause
// that matches ErrNotOwned (the driver builds it from Config.NotOwned, set
// by the fleet), names the new owner, and is the cause the V(1) line
// "cluster given up" logs: the refactor into fleet/internal/shard builds
// that line from the driver's own map of causes, no longer from
// context.Cause(m.ctx).
func TestShardsGivenUpClusterEndsWithErrNotOwnedAndLogsItsCause(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	names := clusterNames(20)
	var buf testlog.Buffer
	var mu sync.Mutex
	ctxs := map[string]context.Context{} // a's members' contexts, by cluster
	a := New(Options{Logger: buf.Logger(1), OnAdd: countAlive(&alive, func(ctx context.Context, m *Member) {
		mu.Lock()
		defer mu.Unlock()
		ctxs[m.Name()] = ctx
	})})
	shardOn(t, a, &hubClient{hub: hub}, "a")
	for _, n := range names {
		if err := a.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	if _, orphans := watchOwners(&alive, names, 0); len(orphans) > 0 {
		t.Fatalf("a alone did not take %v", orphans)
	}
	b := shardedOnHub(t, &hubClient{hub: hub}, "b", &alive)
	var moved []string
	for _, n := range names {
		if shard.OwnerOf([]string{"a", "b"}, n) == "b" {
			moved = append(moved, n)
		}
		if err := b.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	if len(moved) == 0 {
		t.Fatal("rendezvous gives b nothing of 20 clusters")
	}
	for _, n := range moved {
		mu.Lock()
		ctx := ctxs[n]
		mu.Unlock()
		testwait.For(t, "a gives "+n+" up", func() bool { return ctx.Err() != nil })
		cause := context.Cause(ctx)
		if !errors.Is(cause, ErrNotOwned) {
			t.Errorf("%s: a's member ended with %v, want a cause matching ErrNotOwned", n, cause)
		}
		if !strings.Contains(cause.Error(), `gave cluster "`+n+`" up`) {
			t.Errorf("%s: cause %q does not say a gave it up", n, cause)
		}
		line := `"msg"="cluster given up" "cluster"=` + strconv.Quote(n) + ` "cause"=` + strconv.Quote(cause.Error())
		deadline := time.Now().Add(testwait.Hang)
		for !strings.Contains(buf.String(), line) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if !strings.Contains(buf.String(), line) {
			t.Errorf("%s: no V(1) line %s\nlog:\n%s", n, line, buf.String())
		}
	}
	// And RESTConfig's error for it, on a, matches ErrNotOwned and names b.
	if _, err := a.RESTConfig(context.Background(), moved[0]); !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), `replica "b"`) {
		t.Errorf("RESTConfig on a of %s, moved to b: %v, want ErrNotOwned naming b", moved[0], err)
	}
}
