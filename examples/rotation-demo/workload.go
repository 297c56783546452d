package main

import (
	"context"
	"fmt"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// slowCredential is the wait for a credential that the tables count: well
// above a request's own latency on a loaded machine, well below a plugin run.
const slowCredential = 100 * time.Millisecond

// sample is one request as its caller saw it.
type sample struct {
	at   time.Duration // its start, since the scenario's
	took time.Duration
	// wait is the time it spent above net/http (see trace): waiting for a
	// credential, or failing to get one.
	wait time.Duration
	err  outcome
}

type outcome uint8

const (
	ok outcome = iota
	unauthorized
	otherError
)

// counters are a side's running totals, for the progress line.
type counters struct {
	requests, unauthorized, other, slow atomic.Int64
}

// workload has workers create, update, list and delete ConfigMaps through
// cs, as fast as they can, until ctx ends; it returns every request that
// ended before then.
func workload(ctx context.Context, cs kubernetes.Interface, namespace, prefix string, workers int, origin time.Time, c *counters) []sample {
	var mu sync.Mutex // guards all
	var all []sample
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var mine []sample
			record := func(t *trace, err error) {
				s := sample{at: t.start.Sub(origin)}
				s.took, s.wait = t.end()
				switch {
				case ctx.Err() != nil && s.wait <= slowCredential:
					return // cut short by the end of the run: not a result
				case ctx.Err() != nil:
					// Still waiting for a credential at the end: a stall
					// at least this long, which would go unseen otherwise.
				case err == nil:
				case apierrors.IsUnauthorized(err):
					s.err = unauthorized
					c.unauthorized.Add(1)
				default:
					s.err = otherError
					c.other.Add(1)
				}
				if s.wait > slowCredential {
					c.slow.Add(1)
				}
				c.requests.Add(1)
				mine = append(mine, s)
			}
			cms := cs.CoreV1().ConfigMaps(namespace)
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("%s-w%d-%d", prefix, w, i)
				t, rctx := traced(ctx)
				cm, err := cms.Create(rctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Data:       map[string]string{"step": "created"},
				}, metav1.CreateOptions{})
				record(t, err)
				if err != nil {
					continue
				}
				cm.Data["step"] = "updated"
				t, rctx = traced(ctx)
				_, err = cms.Update(rctx, cm, metav1.UpdateOptions{})
				record(t, err)
				t, rctx = traced(ctx)
				_, err = cms.List(rctx, metav1.ListOptions{Limit: 20})
				record(t, err)
				t, rctx = traced(ctx)
				err = cms.Delete(rctx, name, metav1.DeleteOptions{})
				record(t, err)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(all, func(a, b sample) int { return int(a.at - b.at) })
	return all
}

// trace follows one request through net/http, to tell the time it spent
// above it: in client-go's exec authenticator or the vault, which is where
// a request waits for a credential. That is the time before net/http was
// first asked for a connection, and after each answer's first byte until
// net/http was asked again (the vault replaying a request after a 401) or
// the request ended (client-go running its plugin before it hands the 401
// back). Reading an answer's body counts too; it takes microseconds.
type trace struct {
	start time.Time
	mu    sync.Mutex // guards the rest: the first byte comes on net/http's own goroutine
	asked time.Time  // net/http was first asked for a connection; zero: not yet
	since time.Time  // the latest answer's first byte, if no connection was asked for since
	above time.Duration
}

// traced starts a request with ctx.
func traced(ctx context.Context) (*trace, context.Context) {
	t := &trace{start: time.Now()}
	return t, httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) {
			t.mu.Lock()
			defer t.mu.Unlock()
			now := time.Now()
			if t.asked.IsZero() {
				t.asked = now
				t.above = now.Sub(t.start)
			}
			if !t.since.IsZero() {
				t.above += now.Sub(t.since)
				t.since = time.Time{}
			}
		},
		GotFirstResponseByte: func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.since = time.Now()
		},
	})
}

// end is the request's duration and the time it spent above net/http.
func (t *trace) end() (took, above time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	took = now.Sub(t.start)
	switch {
	case t.asked.IsZero():
		return took, took // it never got as far as net/http
	case !t.since.IsZero():
		return took, t.above + now.Sub(t.since)
	}
	return took, t.above
}
