package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/testkit/rotation"
)

// slowCredential is the wait for a credential that the tables count: far
// above what the vault or client-go's authenticator take with a credential
// at hand (microseconds, or a scheduling delay on a loaded machine), well
// below a plugin run.
const slowCredential = 100 * time.Millisecond

// sample is one request as its caller saw it.
type sample struct {
	at   time.Duration // its start, since the scenario's
	took time.Duration
	// wait is the time it spent in the authenticating layer (see trace):
	// waiting for a credential, or failing to get one.
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
// ended before then, and those still waiting for a credential then.
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
				rotation.Cycle(ctx, cms, name, func(ctx context.Context, _ string) (context.Context, func(error)) {
					t, rctx := traced(ctx)
					return rctx, func(err error) { record(t, err) }
				})
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

// trace follows one request, to tell the time it spent in the
// authenticating layer (client-go's exec round tripper or the vault), which
// is where a request waits for a credential: the time inside the side's
// transport (see metered) less the time net/http had it, from each request
// for a connection to the answer's first byte. That counts a wait before
// the request is sent, the vault's wait before it replays a request after
// a 401, and client-go running its plugin before it hands a 401 back.
type trace struct {
	start time.Time
	mu    sync.Mutex // guards the rest: the first byte comes on net/http's own goroutine
	// The current round trip through the transport.
	entered   time.Time
	inNet     bool      // net/http has it
	netFrom   time.Time // since then
	netTotal  time.Duration
	authTotal time.Duration // over the round trips that ended
}

type traceKey struct{}

// traced starts a request with ctx.
func traced(ctx context.Context) (*trace, context.Context) {
	t := &trace{start: time.Now()}
	ctx = context.WithValue(ctx, traceKey{}, t)
	return t, httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) {
			t.mu.Lock()
			defer t.mu.Unlock()
			if !t.inNet { // net/http asking again (a retry after a GOAWAY) is still its time
				t.inNet, t.netFrom = true, time.Now()
			}
		},
		GotFirstResponseByte: func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.inNet {
				t.inNet = false
				t.netTotal += time.Since(t.netFrom)
			}
		},
	})
}

func (t *trace) enter() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entered, t.netTotal = time.Now(), 0
}

func (t *trace) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.inNet { // no answer
		t.inNet = false
		t.netTotal += now.Sub(t.netFrom)
	}
	t.authTotal += now.Sub(t.entered) - t.netTotal
}

// end is the request's duration and the time it spent in the
// authenticating layer.
func (t *trace) end() (took, auth time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Since(t.start), t.authTotal
}

// metered wraps a side's whole transport, its authenticating layer
// included, to mark where each traced request enters and leaves it.
type metered struct{ next http.RoundTripper }

func (m metered) RoundTrip(req *http.Request) (*http.Response, error) {
	t, _ := req.Context().Value(traceKey{}).(*trace)
	if t == nil {
		return m.next.RoundTrip(req)
	}
	t.enter()
	defer t.leave()
	return m.next.RoundTrip(req)
}
