// Command shardbench measures a sharded fleet (fleet.Options.Shards) with
// replicas that are processes: three share the kubeconfig Secrets of a
// thousand clusters on an embedded kube-apiserver (the hub, and every
// cluster's server), each through a TCP proxy of its own to the hub. Then
// one is killed (SIGKILL), a fourth joins, and one is cut from the hub by
// closing its proxy. Every replica writes when it took and gave up each
// cluster, on the machine's one clock; the figures come from those lines:
//
//   - the time until every cluster is owned, from the replicas' start;
//   - after the kill and the cut, how long each cluster of that replica
//     went unowned (goal: at most LeaseDuration + 2×RetryPeriod);
//   - overlaps: a replica's OnAdd before the previous owner's OnRemove, or
//     before the kill (goal: none);
//   - clusters moved on the join (goal: at most 1.5 × 1/N, to the joiner
//     only) and on the kill (the dead replica's only);
//   - Lease writes per second at 1,000 clusters and at 100 (goal: the
//     same, at most replicas / RetryPeriod);
//   - logins, heap and sockets of each replica, beside one unsharded
//     process that serves the same clusters.
//
// make bench-shards runs it with the defaults (about 4 min); the figures
// go to docs/benchmarks.md. It exits non-zero when a goal is missed.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	var rf replicaFlags
	var bf benchFlags
	isReplica := flag.Bool("replica", false, "run as one replica (started by the bench itself)")
	flag.StringVar(&rf.identity, "identity", "", "replica: its identity")
	flag.StringVar(&rf.kubeconfig, "hub", "", "replica: the hub's kubeconfig")
	flag.StringVar(&rf.leases, "leases", "", "replica: the namespace of the Leases")
	flag.StringVar(&rf.secrets, "secrets", "", "replica: the namespace of the kubeconfig Secrets")
	flag.StringVar(&rf.group, "group", "bench", "replica: the group")
	flag.BoolVar(&rf.sharded, "sharded", true, "replica: share the clusters (false: serve every one)")
	flag.IntVar(&rf.verbosity, "v", 0, "the replicas' log verbosity")
	flag.IntVar(&bf.clusters, "clusters", 1000, "clusters (kubeconfig Secrets)")
	flag.IntVar(&bf.small, "small", 100, "clusters of the second measure of Lease writes")
	flag.DurationVar(&bf.window, "window", 20*time.Second, "how long Lease writes are counted")
	flag.StringVar(&bf.dir, "dir", "bin/shardbench", "where the replicas' logs go")
	flag.DurationVar(&rf.leaseDuration, "lease-duration", 15*time.Second, "Shards.LeaseDuration")
	flag.DurationVar(&rf.renewDeadline, "renew-deadline", 10*time.Second, "Shards.RenewDeadline")
	flag.DurationVar(&rf.retryPeriod, "retry-period", 2*time.Second, "Shards.RetryPeriod")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	var err error
	if *isReplica {
		err = replica(rf, os.Stdout)
	} else {
		bf.shards = rf
		var res *results
		res, err = bench(bf)
		if res != nil {
			res.print(os.Stdout)
			if err == nil {
				err = res.missed()
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardbench:", err)
		os.Exit(1)
	}
}
