// Package rotation is the workload of the rotation scenario, the comparison
// benchmark and the demo: workers that create, update, list and delete
// ConfigMaps as fast as they can, and the figures of how that went.
package rotation

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
)

// Stats are what callers saw.
type Stats struct {
	Requests     int64
	Unauthorized int64 // 401s that reached the caller
	OtherErrors  int64
	P50, P99     time.Duration
	Longest      time.Duration // the longest single request: a stall
	// LongestTrace is what the longest request went through (see trace).
	LongestTrace string
	// FirstError is the first error of any kind, for the report.
	FirstError error
}

// Progress is called about once a second while Run runs.
type Progress func(requests, unauthorized, other int64)

// Run has workers create, update, list and delete ConfigMaps in namespace
// through cs until d has passed or ctx ends.
func Run(ctx context.Context, cs kubernetes.Interface, namespace string, workers int, d time.Duration, progress Progress) Stats {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var requests, unauthorized, other atomic.Int64
	var mu sync.Mutex // guards latencies and first
	var latencies []time.Duration
	var first error
	var longest time.Duration
	var longestTrace string

	record := func(tr *trace, err error) {
		took := time.Since(tr.start)
		requests.Add(1)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			requests.Add(-1) // cut short by the end of the run: not a result
			return
		case apierrors.IsUnauthorized(err):
			unauthorized.Add(1)
		default:
			other.Add(1)
		}
		mu.Lock()
		latencies = append(latencies, took)
		if took > longest {
			longest = took
			longestTrace = fmt.Sprintf("%s: %s, end %s err=%v", tr.op, tr, took.Round(100*time.Microsecond), err)
		}
		if err != nil {
			if first == nil {
				first = err
			}
		}
		mu.Unlock()
	}

	run := time.Now().UnixNano() % 1e6 // names of one run never meet another's leftovers
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			cms := cs.CoreV1().ConfigMaps(namespace)
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("rotation-%d-w%d-%d", run, w, i)
				Cycle(ctx, cms, name, func(ctx context.Context, op string) (context.Context, func(error)) {
					tr := newTrace(op)
					return tr.with(ctx), func(err error) { record(tr, err) }
				})
			}
		})
	}
	workersDone := make(chan struct{})
	var reporter sync.WaitGroup
	if progress != nil {
		reporter.Go(func() {
			ticker := time.NewTicker(time.Second)
			defer ticker.Stop()
			for {
				select {
				case <-workersDone:
					return
				case <-ticker.C:
					progress(requests.Load(), unauthorized.Load(), other.Load())
				}
			}
		})
	}
	wg.Wait()
	close(workersDone)
	reporter.Wait()

	slices.Sort(latencies)
	s := Stats{Requests: requests.Load(), Unauthorized: unauthorized.Load(), OtherErrors: other.Load(), FirstError: first,
		LongestTrace: longestTrace}
	if n := len(latencies); n > 0 {
		s.P50, s.P99, s.Longest = latencies[n/2], latencies[n*99/100], latencies[n-1]
	}
	return s
}
