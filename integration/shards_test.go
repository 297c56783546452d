package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/tcpproxy"
	"github.com/authvault/authvault/testkit/testwait"
)

// Three replicas of one program in this process, each a fleet with its own
// connection to the hub (the suite's cluster) through a TCP proxy of its
// own, share 120 clusters on Leases. One clock, this process's, orders
// every replica's OnAdd and OnRemove: for every cluster, no two replicas'
// spans of ownership overlap. How long a cluster goes unowned is a figure
// of the benchmark (make bench-shards), not a bound here: a test's limits
// bound hangs, not the machine's speed.
var _ = Describe("A sharded fleet", Ordered, Label("long"), func() {
	const clusters = 120
	shards := fleet.Shards{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	var (
		ns       string
		book     *ownershipBook
		replicas = map[string]*shardReplica{}
		// hangs holds, for a replica, what its OnRemoves wait for once
		// they have recorded the removal: an OnRemove that hangs.
		hangs = map[string]chan struct{}{}
	)

	start := func(id string) *shardReplica {
		u, _, err := rest.DefaultServerUrlFor(cluster.Admin)
		Expect(err).NotTo(HaveOccurred())
		proxy, err := tcpproxy.Start(u.Host)
		Expect(err).NotTo(HaveOccurred())
		cfg := rest.CopyConfig(cluster.Admin)
		cfg.Host = "https://" + proxy.Addr()
		sh := shards
		sh.Config, sh.Namespace, sh.Group, sh.Identity = cfg, ns, "shards", id
		r := &shardReplica{id: id, proxy: proxy}
		r.fleet = fleet.New(fleet.Options{
			Shards: &sh,
			Logger: GinkgoLogr.WithValues("test-replica", id),
			OnAdd:  func(ctx context.Context, m *fleet.Member) { book.added(id, ctx, m) },
			OnRemove: func(m *fleet.Member) {
				book.removed(id, m)
				if hung := hangs[id]; hung != nil {
					<-hung
				}
			},
		})
		for i := range clusters {
			name := fmt.Sprintf("c%03d", i)
			Expect(r.fleet.Add(name, book.handler(id, name))).To(Succeed())
		}
		replicas[id] = r
		return r
	}

	BeforeAll(func() {
		ns = newNamespace("shards")
		book = newOwnershipBook()
		DeferCleanup(func() {
			for _, r := range replicas {
				r.fleet.Close()
				r.proxy.Close()
			}
		})
	})

	AfterEach(func() {
		Expect(book.overlaps()).To(BeEmpty(), "no cluster had two owners at once")
		Expect(book.loginsWithoutOwnership()).To(BeEmpty(), "a replica logged in only to clusters it owned")
	})

	It("shares the clusters out among three replicas, each with one owner, and a non-owner names the owner", func(ctx SpecContext) {
		for _, id := range []string{"r0", "r1", "r2"} {
			start(id)
		}
		Eventually(func() bool { return book.settled(clusters, 2*shards.RetryPeriod) }).WithTimeout(testwait.Hang).Should(BeTrue())
		counts := book.countsByReplica()
		report("sharded fleet: 120 clusters over 3 replicas: %v", counts)
		Expect(counts).To(HaveLen(3), "every replica owns some")
		for _, n := range counts {
			Expect(n).To(BeNumerically(">=", clusters/6), "rendezvous hashing shares them out: %v", counts)
		}
		owner := book.owners()["c000"]
		other := "r0"
		if owner == "r0" {
			other = "r1"
		}
		_, err := replicas[other].fleet.RESTConfig(ctx, "c000")
		Expect(err).To(MatchError(fleet.ErrNotOwned))
		Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("owned by replica %q", owner)))
		cfg, err := replicas[owner].fleet.RESTConfig(ctx, "c000")
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Host).To(Equal(cluster.Server))
		Eventually(book.loggedIn).WithTimeout(testwait.Hang).Should(BeNumerically(">=", clusters), "each owner's OnAdd logs its clusters in")
	}, NodeTimeout(2*time.Minute))

	It("moves about a quarter of them to a replica that joins, each once its owner has let it go", func(ctx SpecContext) {
		before := book.owners()
		start("r3")
		Eventually(func() bool { return book.countsByReplica()["r3"] > 0 && book.settled(clusters, 2*shards.RetryPeriod) }).
			WithTimeout(testwait.Hang).Should(BeTrue(), "r3 took its share and nothing moves")
		after := book.owners()
		moved := 0
		for name, owner := range after {
			if before[name] != owner {
				Expect(owner).To(Equal("r3"), "%s moved to r3 only", name)
				moved++
			}
		}
		report("sharded fleet: a fourth replica took %d of %d clusters (1/4 is %d)", moved, clusters, clusters/4)
		Expect(moved).To(BeNumerically("<=", clusters*3/2/4), "about 1/4 moved")
		for _, c := range book.causes("r0", "r1", "r2") {
			Expect(c).To(MatchError(fleet.ErrNotOwned))
		}
	}, NodeTimeout(2*time.Minute))

	It("hands a replica's clusters to the others at once when it closes", func(ctx SpecContext) {
		before := book.owners()
		closed := time.Now()
		replicas["r3"].fleet.Close()
		Eventually(func() bool { return book.countsByReplica()["r3"] == 0 && len(book.owners()) == clusters }).
			WithTimeout(testwait.Hang).Should(BeTrue())
		report("sharded fleet: every cluster owned again %v after a replica's Close began", time.Since(closed).Round(time.Millisecond))
		Eventually(func() bool { return book.settled(clusters, 2*shards.RetryPeriod) }).WithTimeout(testwait.Hang).Should(BeTrue())
		for name, owner := range book.owners() {
			if before[name] != "r3" {
				Expect(owner).To(Equal(before[name]), "%s stayed where it was", name)
			}
		}
		for _, c := range book.causes("r3") {
			Expect(c).To(MatchError(fleet.ErrClosed))
		}
	}, NodeTimeout(2*time.Minute))

	// F2 (issue 58): a rolling update's Close, with an OnRemove that waits
	// on something that never comes.
	It("hands a replica's clusters over at once when it closes with an OnRemove that hangs, and its Close returns", func(ctx SpecContext) {
		hung := make(chan struct{})
		DeferCleanup(func() { close(hung) })
		hangs["slow"] = hung
		start("slow")
		Eventually(func() bool { return book.countsByReplica()["slow"] > 0 && book.settled(clusters, 2*shards.RetryPeriod) }).
			WithTimeout(testwait.Hang).Should(BeTrue(), "slow took its share")
		closing := time.Now()
		closed := make(chan struct{})
		go func() { replicas["slow"].fleet.Close(); close(closed) }()
		Eventually(func() bool { return book.countsByReplica()["slow"] == 0 && len(book.owners()) == clusters }).
			WithTimeout(testwait.Hang).WithPolling(10 * time.Millisecond).Should(BeTrue())
		handedOver := time.Since(closing)
		report("sharded fleet: a replica whose OnRemoves hang closed: every cluster owned again %v after its Close began (LeaseDuration %v)",
			handedOver.Round(time.Millisecond), shards.LeaseDuration)
		Expect(handedOver).To(BeNumerically("<", shards.LeaseDuration/2), "the release, not the Lease's expiry, handed them over")
		Eventually(closed).WithTimeout(testwait.Hang).Should(BeClosed(), "Close returns, its OnRemoves still hung")
		report("sharded fleet: its Close returned %v after it began", time.Since(closing).Round(time.Millisecond))
	}, NodeTimeout(2*time.Minute))

	// An operator's reset during an incident (kubectl delete lease -l
	// <group label>), then a rollout's new pod: the finalizer keeps each
	// Lease, marked, until its holder has given its clusters up, so the
	// new replica sees every replica that may hold one.
	It("gives no cluster two owners when the group's Leases are deleted and a new replica starts at once", func(ctx SpecContext) {
		leases := kubernetes.NewForConfigOrDie(cluster.Admin).CoordinationV1().Leases(ns)
		Expect(leases.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "fleet.authvault.dev/group=shards"})).To(Succeed())
		start("r4")
		Eventually(func() bool { return book.countsByReplica()["r4"] > 0 && book.settled(clusters, 2*shards.RetryPeriod) }).
			WithTimeout(testwait.Hang).Should(BeTrue(), "r4 took its share and nothing moves")
		report("sharded fleet: after the group's Leases were deleted, a new replica took %d of %d clusters", book.countsByReplica()["r4"], clusters)
	}, NodeTimeout(2*time.Minute))

	It("takes the clusters of a replica cut from the hub only after it has given them up", func(ctx SpecContext) {
		before := book.owners()
		mine := 0
		for _, owner := range before {
			if owner == "r0" {
				mine++
			}
		}
		cut := time.Now()
		replicas["r0"].proxy.Close()
		Eventually(func() bool { return book.countsByReplica()["r0"] == 0 && len(book.owners()) == clusters }).
			WithTimeout(testwait.Hang).Should(BeTrue())
		again := time.Since(cut)
		Eventually(func() bool { return book.settled(clusters, 2*shards.RetryPeriod) }).WithTimeout(testwait.Hang).Should(BeTrue())
		report("sharded fleet: %d clusters of a replica cut from the hub owned again %v after the cut (LeaseDuration %v, RetryPeriod %v)",
			mine, again.Round(time.Millisecond), shards.LeaseDuration, shards.RetryPeriod)
		for name, owner := range book.owners() {
			Expect(owner).NotTo(Equal("r0"))
			if before[name] != "r0" {
				Expect(owner).To(Equal(before[name]), "%s stayed where it was", name)
			}
		}
		for _, c := range book.causes("r0") {
			if !errors.Is(c, fleet.ErrNotOwned) {
				continue // moved to r3 and back before the cut
			}
			Expect(c.Error()).NotTo(BeEmpty())
		}
		Expect(book.fencedCauses("r0", cut)).To(Equal(mine), "each of r0's clusters ended for its lost Lease")
		_, err := replicas["r0"].fleet.RESTConfig(ctx, "c000")
		Expect(err).To(MatchError(fleet.ErrNotOwned))
	}, NodeTimeout(2*time.Minute))
})

// shardReplica is one replica of a sharded fleet test.
type shardReplica struct {
	id    string
	fleet *fleet.Fleet
	proxy *tcpproxy.Proxy
}

// ownershipBook records, on one clock, when each replica's OnAdd ran for
// a cluster and when its OnRemove did (after the context OnAdd got had
// ended), and which replicas' handlers logged in to which clusters.
type ownershipBook struct {
	mu     sync.Mutex
	spans  map[string][]*ownedSpan // by cluster
	logins map[[2]string]int       // by replica and cluster
}

type ownedSpan struct {
	replica   string
	from, to  time.Time // OnAdd and OnRemove; to: zero while owned
	cause     error     // of the context's end
	ended     time.Time // when the context ended; zero: not yet
	endedSeen bool
}

// end is when s stopped owning its cluster: its context ended (the fleet
// gives a cluster up by ending it, and closes its vault beside OnRemove);
// far in the future while it owns it.
func (s *ownedSpan) end() time.Time {
	if s.endedSeen {
		return s.ended
	}
	return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
}

func newOwnershipBook() *ownershipBook {
	return &ownershipBook{spans: map[string][]*ownedSpan{}, logins: map[[2]string]int{}}
}

func (b *ownershipBook) added(replica string, ctx context.Context, m *fleet.Member) {
	b.mu.Lock()
	span := &ownedSpan{replica: replica, from: time.Now()}
	b.spans[m.Name()] = append(b.spans[m.Name()], span)
	b.mu.Unlock()
	context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		span.cause, span.ended, span.endedSeen = context.Cause(ctx), time.Now(), true
	})
	go func() { _, _ = m.RESTConfig(ctx) }() // logs in
}

func (b *ownershipBook) removed(replica string, m *fleet.Member) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	spans := b.spans[m.Name()]
	for i := len(spans) - 1; i >= 0; i-- {
		if spans[i].replica == replica && spans[i].to.IsZero() {
			spans[i].to = now
			return
		}
	}
}

// handler is replica's login handler for the cluster name: the hub, with
// a token of its issuer.
func (b *ownershipBook) handler(replica, name string) login.Handler {
	return func(ctx context.Context) (*login.ConnectionInfo, error) {
		b.mu.Lock()
		b.logins[[2]string{replica, name}]++
		b.mu.Unlock()
		return &login.ConnectionInfo{Server: cluster.Server, CAData: cluster.CAData, Token: cluster.Issuer.Issue(time.Hour)}, nil
	}
}

// owners returns each owned cluster's owner.
func (b *ownershipBook) owners() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	owners := map[string]string{}
	for name, spans := range b.spans {
		for _, s := range spans {
			if s.to.IsZero() {
				owners[name] = s.replica
			}
		}
	}
	return owners
}

// settled tells whether all n clusters are owned, and stay with the same
// owners for quiet.
func (b *ownershipBook) settled(n int, quiet time.Duration) bool {
	before := b.owners()
	time.Sleep(quiet)
	return len(before) == n && maps.Equal(before, b.owners())
}

func (b *ownershipBook) countsByReplica() map[string]int {
	counts := map[string]int{}
	for _, owner := range b.owners() {
		counts[owner]++
	}
	return counts
}

// overlaps lists every pair of spans of one cluster that intersect: each
// began before the other ended, whichever began first and whether or not
// either has ended.
func (b *ownershipBook) overlaps() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for name, spans := range b.spans {
		for i, s := range spans {
			for _, t := range spans[i+1:] {
				if s.from.Before(t.end()) && t.from.Before(s.end()) {
					out = append(out, fmt.Sprintf("%s: owned by %s (from %v) and %s (from %v) at once", name, s.replica, s.from.Format(time.StampMicro), t.replica, t.from.Format(time.StampMicro)))
				}
			}
		}
	}
	return out
}

// loginsWithoutOwnership lists the logins of a replica to a cluster it
// never owned.
func (b *ownershipBook) loginsWithoutOwnership() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for key := range b.logins {
		owned := false
		for _, s := range b.spans[key[1]] {
			owned = owned || s.replica == key[0]
		}
		if !owned {
			out = append(out, fmt.Sprintf("%s logged in to %s", key[0], key[1]))
		}
	}
	return out
}

// loggedIn is how many clusters some replica has logged in to.
func (b *ownershipBook) loggedIn() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	names := map[string]bool{}
	for key := range b.logins {
		names[key[1]] = true
	}
	return len(names)
}

// causes returns why the replicas' ended spans ended.
func (b *ownershipBook) causes(replicas ...string) []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []error
	for _, spans := range b.spans {
		for _, s := range spans {
			for _, r := range replicas {
				if s.replica == r && s.endedSeen {
					out = append(out, s.cause)
				}
			}
		}
	}
	return out
}

// fencedCauses counts the replica's spans that ended since since because
// it lost the hub.
func (b *ownershipBook) fencedCauses(replica string, since time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, spans := range b.spans {
		for _, s := range spans {
			// Cut from the hub, a replica gives its clusters up at the
			// first of its fence (no renewal counted) and its standing by
			// (no list), whichever the timing brings first.
			if s.replica == replica && s.endedSeen && !s.ended.Before(since) && errors.Is(s.cause, fleet.ErrNotOwned) &&
				(strings.Contains(s.cause.Error(), "counted within RenewDeadline") || strings.Contains(s.cause.Error(), "has not listed the group's Leases")) {
				n++
			}
		}
	}
	return n
}
