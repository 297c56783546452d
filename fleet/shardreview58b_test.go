package fleet

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/authvault/authvault/fleet/internal/shard"
	"github.com/authvault/authvault/testkit/testlog"
)

// Review 58b: the new paths (group Leases found by name, an unannotated
// one claiming everything, another finalizer holding a marked Lease), as
// an attacker and as a new user.

// ownedWithin polls alive until every cluster of names has an owner or d
// has passed, and returns the clusters without one at the end.
func ownedWithin(alive *sync.Map, names []string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		var orphans []string
		for _, n := range names {
			if v, ok := alive.Load(n); !ok || v.(*atomic.Int32).Load() == 0 {
				orphans = append(orphans, n)
			}
		}
		if len(orphans) == 0 || time.Now().After(deadline) {
			return orphans
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// otherToolsLease is a Lease another tool keeps in the namespace, whose name
// happens to be the group's, a dash and sixteen lowercase hex digits: no
// label, annotation or finalizer of this package's.
func otherToolsLease(name string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app.kubernetes.io/managed-by": "other-tool"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other-tool-7d9f"), LeaseDurationSeconds: ptr.To(int32(1)), RenewTime: &now},
	}
}

// R58b-1. A Lease that no replica wrote, of a name inGroup accepts, is
// read as a peer's unreadable Lease: it claims every cluster, so while
// its tool renews it no replica takes anything (a lone replica: every
// cluster unowned, for good); and once it stops changing for its
// duration, the replicas delete it (another tool's object). The ERROR
// line names its holder, not the Lease a person should look at.
func TestShardsReview58bForeignLeaseOfAGroupName(t *testing.T) {
	const name = "g-0123456789abcdef" // of the group's form: shard's TestLeaseNamesAreValidWhateverTheIdentity
	t.Run("renewed by its tool", func(t *testing.T) {
		hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
		other := &hubClient{hub: hub}
		if _, err := other.Create(context.Background(), otherToolsLease(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { // the tool renews it every 100 ms
			for ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
				if l, err := other.Get(ctx, name, metav1.GetOptions{}); err == nil {
					l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
					_, _ = other.Update(ctx, l, metav1.UpdateOptions{})
				}
			}
		}()
		var alive sync.Map
		var adds atomic.Int32
		buf := &testlog.Buffer{}
		f := review58Fleet(t, hub, "a", hubDurations, buf, &alive, &adds)
		names := clusterNames(5)
		for _, n := range names {
			if err := f.Add(n, never); err != nil {
				t.Fatal(err)
			}
		}
		if orphans := ownedWithin(&alive, names, 3*time.Second); len(orphans) > 0 {
			t.Errorf("a lone replica owns none of %d clusters 3 s on (LeaseDuration %v): another tool's Lease %q claims them", len(orphans), hubDurations.LeaseDuration, name)
		}
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Contains(line, "cannot be read") && !strings.Contains(line, name) {
				t.Errorf("the line that says why nothing is taken does not name the Lease to look at: %s", line)
			}
		}
	})
	t.Run("left alone by its tool", func(t *testing.T) {
		hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
		other := &hubClient{hub: hub}
		if _, err := other.Create(context.Background(), otherToolsLease(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var alive sync.Map
		var adds atomic.Int32
		f := review58Fleet(t, hub, "a", hubDurations, &testlog.Buffer{}, &alive, &adds)
		if err := f.Add("ns/c00", never); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if hub.get(name) == nil {
			t.Errorf("the replica deleted another tool's Lease %q, which carries no label, annotation or finalizer of this package's", name)
		}
	})
}

// keepFinalizer is a finalizer of another tool's, which it never takes
// off (the tool was uninstalled, or it waits for something that never
// comes).
const keepFinalizer = "policy.example.com/keep"

// R58b-2. A replica's Lease is marked while another finalizer holds it:
// the replica stands by, writing it each RetryPeriod, until it goes. A
// lone replica then owns nothing for as long as that finalizer stays, and
// the one line it logs says that it "lets that Lease go and writes a new
// one", which it never does; nothing names the finalizer a person has to
// take off. Its writes of the marked Lease succeed but do not count as
// renewals (wrote returns before c.renewed), so RenewDeadline later it
// also logs "gave every cluster up" (0 clusters) because "no renewal of
// this replica's Lease counted ... (failed, or slower than its timeout)".
func TestShardsReview58bStandbyOnAForeignFinalizerSaysWhichFinalizer(t *testing.T) {
	hub := &leaseHub{leases: map[string]*coordinationv1.Lease{}}
	var alive sync.Map
	var adds atomic.Int32
	buf := &testlog.Buffer{}
	f := review58Fleet(t, hub, "a", hubDurations, buf, &alive, &adds)
	names := clusterNames(5)
	for _, n := range names {
		if err := f.Add(n, never); err != nil {
			t.Fatal(err)
		}
	}
	if orphans := ownedWithin(&alive, names, 2*time.Second); len(orphans) > 0 {
		t.Fatalf("orphans before: %v", orphans)
	}
	lease := shard.LeaseName("g", "a")
	c := &hubClient{hub: hub}
	for { // the tool adds its finalizer (a Conflict with a's renewal: again)
		l, err := c.Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Finalizers = append(l.Finalizers, keepFinalizer)
		if _, err := c.Update(context.Background(), l, metav1.UpdateOptions{}); err == nil {
			break
		}
	}
	if err := c.Delete(context.Background(), lease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if l := hub.get(lease); l == nil || l.DeletionTimestamp == nil {
		t.Fatalf("a's Lease should stay marked while %s holds it: %+v", keepFinalizer, l)
	}
	if !strings.Contains(buf.String(), keepFinalizer) {
		t.Errorf("a claims no share while %s holds its Lease, and no line names that finalizer; it logged:\n%s", keepFinalizer, tail(buf.String(), 6))
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "claims no share") && strings.Contains(line, "writes a new one") {
			t.Errorf("a says it writes a new Lease, which it cannot while another finalizer holds the old one: %s", line)
		}
		if strings.Contains(line, "no renewal of this replica's Lease counted") {
			t.Errorf("a renews its marked Lease each RetryPeriod, and says no renewal counted: %s", line)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
