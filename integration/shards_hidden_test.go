package integration

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/tcpproxy"
	"github.com/authvault/authvault/testkit/testwait"
)

// F1 of issue 58 on a real API server: replicas of one group whose
// LeaseDurations differ four times (a rolling change of Shards). The one
// of the longer durations owns every cluster, is cut from the hub, and
// someone deletes its Lease; one of the shorter durations starts and never
// reaches it. The API server keeps the deleted Lease, marked, while its
// finalizer is on, so the new replica waits out the hidden one's
// LeaseDuration: no cluster has two owners.
var _ = Describe("A sharded fleet whose replicas' durations differ", Label("long"), func() {
	It("gives no cluster two owners when the replica of the longer ones is hidden by a deleted Lease", func(ctx SpecContext) {
		const clusters = 20
		ns := newNamespace("hidden")
		book := newOwnershipBook()
		long := fleet.Shards{LeaseDuration: 8 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: 500 * time.Millisecond}
		short := fleet.Shards{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 250 * time.Millisecond}
		start := func(id string, sh fleet.Shards) (*fleet.Fleet, *tcpproxy.Proxy) {
			u, _, err := rest.DefaultServerUrlFor(cluster.Admin)
			Expect(err).NotTo(HaveOccurred())
			proxy, err := tcpproxy.Start(u.Host)
			Expect(err).NotTo(HaveOccurred())
			cfg := rest.CopyConfig(cluster.Admin)
			cfg.Host = "https://" + proxy.Addr()
			sh.Config, sh.Namespace, sh.Group, sh.Identity = cfg, ns, "hidden", id
			f := fleet.New(fleet.Options{
				Shards:   &sh,
				Logger:   GinkgoLogr.WithValues("test-replica", id),
				OnAdd:    func(ctx context.Context, m *fleet.Member) { book.added(id, ctx, m) },
				OnRemove: func(m *fleet.Member) { book.removed(id, m) },
			})
			for i := range clusters {
				name := fmt.Sprintf("c%03d", i)
				Expect(f.Add(name, book.handler(id, name))).To(Succeed())
			}
			DeferCleanup(func() { f.Close(); proxy.Close() })
			return f, proxy
		}
		_, proxy := start("long", long)
		Eventually(func() bool { return book.countsByReplica()["long"] == clusters }).WithTimeout(testwait.Hang).Should(BeTrue())

		leases := kubernetes.NewForConfigOrDie(cluster.Admin).CoordinationV1().Leases(ns)
		list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "fleet.authvault.dev/group=hidden"})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(1))
		Expect(list.Items[0].Finalizers).To(ContainElement("fleet.authvault.dev/shard"))
		proxy.Close()
		cut := time.Now()
		Expect(leases.Delete(ctx, list.Items[0].Name, metav1.DeleteOptions{})).To(Succeed())
		marked, err := leases.Get(ctx, list.Items[0].Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the finalizer keeps the deleted Lease")
		Expect(marked.DeletionTimestamp).NotTo(BeNil())

		start("short", short)
		Eventually(func() bool { return book.countsByReplica()["short"] == clusters }).WithTimeout(testwait.Hang).Should(BeTrue())
		report("sharded fleet: a replica of 4× the LeaseDuration, cut and its Lease deleted: the new replica owned every cluster %v after the cut (the hidden one's RenewDeadline %v, LeaseDuration %v)",
			time.Since(cut).Round(time.Millisecond), long.RenewDeadline, long.LeaseDuration)
		Expect(book.overlaps()).To(BeEmpty(), "no cluster had two owners at once")
		Expect(book.loginsWithoutOwnership()).To(BeEmpty())
		Eventually(func() []coordinationv1.Lease {
			l, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "fleet.authvault.dev/group=hidden"})
			Expect(err).NotTo(HaveOccurred())
			return l.Items
		}).WithTimeout(testwait.Hang).Should(HaveLen(1), "the new replica took the finalizer off the hidden one's expired Lease, which went")
	}, NodeTimeout(2*time.Minute))
})
