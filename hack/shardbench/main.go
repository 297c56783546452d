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
// With -scale it measures the scale instead (scale.go): ten thousand
// clusters over five replicas.
//
// make bench-shards runs both with the defaults (about 8 min); the figures
// go to docs/benchmarks.md. It exits non-zero when a goal is missed.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// figures are a bench's results.
type figures interface {
	print(w io.Writer)
	missed() error
}

// report prints res when there are figures (ok), and returns the bench's
// error, or else the goals res misses.
func report(out io.Writer, res figures, ok bool, err error) error {
	if !ok {
		return err
	}
	res.print(out)
	if err != nil {
		return err
	}
	return res.missed()
}

func main() { os.Exit(command(os.Args[1:], os.Stdout)) }

// command runs the bench, or a replica with -replica, on the command line
// args, and returns the exit code.
func command(args []string, out io.Writer) int {
	var rf replicaFlags
	var bf benchFlags
	fs := flag.NewFlagSet("shardbench", flag.ExitOnError)
	isReplica := fs.Bool("replica", false, "run as one replica (started by the bench itself)")
	fs.StringVar(&rf.identity, "identity", "", "replica: its identity")
	fs.StringVar(&rf.kubeconfig, "hub", "", "replica: the hub's kubeconfig")
	fs.StringVar(&rf.leases, "leases", "", "replica: the namespace of the Leases")
	fs.StringVar(&rf.secrets, "secrets", "", "replica: the namespace of the kubeconfig Secrets")
	fs.StringVar(&rf.group, "group", "bench", "replica: the group")
	fs.BoolVar(&rf.sharded, "sharded", true, "replica: share the clusters (false: serve every one)")
	fs.IntVar(&rf.verbosity, "v", 0, "the replicas' log verbosity")
	fs.BoolVar(&rf.connect, "connect", true, "replica: each owned cluster logs in and asks its version")
	scale := fs.Bool("scale", false, "measure the scale instead: -clusters (default 10,000) over -replicas (5), no logins")
	fs.IntVar(&bf.replicas, "replicas", 5, "with -scale: the replicas")
	fs.IntVar(&bf.clusters, "clusters", 0, "clusters (kubeconfig Secrets; default 1,000, or 10,000 with -scale)")
	fs.IntVar(&bf.small, "small", 100, "clusters of the second measure of Lease writes")
	fs.DurationVar(&bf.window, "window", 20*time.Second, "how long Lease writes are counted")
	fs.StringVar(&bf.dir, "dir", "bin/shardbench", "where the replicas' logs go")
	fs.DurationVar(&rf.leaseDuration, "lease-duration", 15*time.Second, "Shards.LeaseDuration")
	fs.DurationVar(&rf.renewDeadline, "renew-deadline", 10*time.Second, "Shards.RenewDeadline")
	fs.DurationVar(&rf.retryPeriod, "retry-period", 2*time.Second, "Shards.RetryPeriod")
	_ = fs.Parse(args)
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	var err error
	switch {
	case *isReplica:
		err = replica(rf, out)
	case *scale:
		bf.shards = rf
		bf.clusters = cmp.Or(bf.clusters, 10000)
		res, benchErr := scaleBench(bf)
		err = report(out, res, res != nil, benchErr)
	default:
		bf.shards = rf
		bf.clusters = cmp.Or(bf.clusters, 1000)
		res, benchErr := bench(bf)
		err = report(out, res, res != nil, benchErr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardbench:", err)
		return 1
	}
	return 0
}
