package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// scaleResults are the scale bench's figures: the clusters of Rancher and
// Argo CD users (thousands) over a Deployment's replicas.
type scaleResults struct {
	flags     benchFlags
	fromStart time.Duration // every cluster owned, from the first process's start
	takes     int           // until then and nothing moved
	writes    float64       // Lease writes per second, settled
	// Heap (after a GC) of: a replica over no cluster; replica s0 in the
	// group (owning share of the clusters); and s0 alone, owning all.
	empty, shared, alone uint64
	share                int
}

// scaleBench starts bf.replicas replica processes together over
// bf.clusters kubeconfig Secrets (no logins: the figure is the protocol's
// and the fleet's, not the clusters'), measures how soon every cluster is
// owned and what a replica holds of the clusters it does not own, then
// stops all but one and measures that one owning every cluster.
func scaleBench(bf benchFlags) (*scaleResults, error) {
	bf.shards.connect = false
	r, stop, err := startRun(bf)
	if err != nil {
		return nil, err
	}
	defer stop()
	ctx := context.Background()
	res := &scaleResults{flags: bf}
	r.leases = r.namespace(ctx, "leases")

	// A replica of its own group over no cluster: what a replica costs
	// before any cluster.
	none := r.namespace(ctx, "none")
	if err := r.start("empty", none, "empty", true); err != nil {
		return nil, err
	}
	time.Sleep(3 * bf.shards.retryPeriod)
	if err := r.waitForStats("empty", 2); err != nil {
		return res, err
	}
	res.empty = r.stats("empty")["empty"].Heap
	r.stopAll()
	r.reset()

	secrets := r.namespace(ctx, "clusters")
	if err := r.putSecrets(ctx, secrets, bf.clusters); err != nil {
		return nil, err
	}
	writes := r.countLeaseWrites(ctx)
	ids := make([]string, bf.replicas)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i)
		if err := r.start(ids[i], secrets, "scale", true); err != nil {
			return nil, err
		}
	}
	if err := r.waitFor("every cluster owned", func(o map[string]string) bool { return len(o) == bf.clusters }); err != nil {
		return res, err
	}
	res.fromStart = r.sinceStart(ids...)
	r.settle()
	res.takes = r.count("add")
	res.writes = writes(bf.window)
	if err := r.waitForStats("s0", 2); err != nil {
		return res, err
	}
	st := r.stats("s0")["s0"]
	res.shared, res.share = st.Heap, st.Owned

	// s0 alone: the others stop cleanly, and it takes every cluster.
	for _, id := range ids[1:] {
		r.stop(id)
	}
	if err := r.waitFor("s0 owning every cluster", func(o map[string]string) bool { return countOf(o, "s0") == bf.clusters }); err != nil {
		return res, err
	}
	r.settle()
	if err := r.waitForStats("s0", 2); err != nil {
		return res, err
	}
	res.alone = r.stats("s0")["s0"].Heap
	return res, errors.Join(r.failures...)
}

// perUnowned is the heap a replica holds per cluster it does not own:
// from the three heaps, with owning a cluster costing the difference per
// cluster between s0 alone and s0 in the group more than not owning it.
func (res *scaleResults) perUnowned() float64 {
	n, k := float64(res.flags.clusters), float64(res.share)
	owning := (float64(res.alone) - float64(res.shared)) / (n - k) // owned − unowned, per cluster
	return (float64(res.shared) - float64(res.empty) - k*owning) / n
}

func (res *scaleResults) print(w io.Writer) {
	sh := res.flags.shards
	fmt.Fprintf(w, "shardbench -scale: %d clusters, %d replica processes started together, LeaseDuration %v, RenewDeadline %v, RetryPeriod %v, no logins\n\n",
		res.flags.clusters, res.flags.replicas, sh.leaseDuration, sh.renewDeadline, sh.retryPeriod)
	fmt.Fprintf(w, "| measure | figure | goal |\n| --- | ---: | --- |\n")
	fmt.Fprintf(w, "| every cluster owned, from the first replica process's start | %v | ≤ 5s |\n", res.fromStart.Round(time.Millisecond))
	fmt.Fprintf(w, "| takes per cluster at the start | %.2f | 1 |\n", float64(res.takes)/float64(res.flags.clusters))
	fmt.Fprintf(w, "| Lease writes per second | %.2f | ≤ %.2f |\n", res.writes, float64(res.flags.replicas)/sh.retryPeriod.Seconds())
	fmt.Fprintf(w, "| heap of a replica: no cluster / in the group (owning %d) / alone (owning all) | %.1f / %.1f / %.1f MiB | |\n",
		res.share, float64(res.empty)/(1<<20), float64(res.shared)/(1<<20), float64(res.alone)/(1<<20))
	fmt.Fprintf(w, "| heap per cluster a replica does not own | %.1f KB | ≤ 10 KB |\n", res.perUnowned()/1000)
}

func (res *scaleResults) missed() error {
	var errs []error
	if res.fromStart > 5*time.Second {
		errs = append(errs, fmt.Errorf("every cluster was owned %v after the first replica started, past 5 s", res.fromStart))
	}
	if res.takes != res.flags.clusters {
		errs = append(errs, fmt.Errorf("%d takes at the start for %d clusters", res.takes, res.flags.clusters))
	}
	if most := float64(res.flags.replicas) / res.flags.shards.retryPeriod.Seconds(); res.writes > most*1.1 {
		errs = append(errs, fmt.Errorf("%.2f Lease writes per second, past replicas / RetryPeriod (%.2f)", res.writes, most))
	}
	if u := res.perUnowned(); u > 10000 {
		errs = append(errs, fmt.Errorf("%.0f bytes of heap per cluster a replica does not own, past 10 KB", u))
	}
	return errors.Join(errs...)
}
