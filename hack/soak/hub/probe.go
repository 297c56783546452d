package hub

import (
	"context"
	"sync"
	"time"

	"github.com/authvault/authvault/hack/soak/report"
)

// The harness's own look at the API server. On a busy machine it can stall
// for seconds with no fault of the harness's (etcd's fsync, the scheduler
// of two cores shared with other builds): every caller on both sides then
// waits, and a leader election misses its renewal. Such a stall is a fault
// the harness saw rather than caused: it explains what callers met during
// it, on both sides alike, and the report lists it with the others.

const (
	probeEvery = time.Second
	// SlowProbe is an answer slow enough to call a stall: a GET of a
	// namespace takes milliseconds.
	SlowProbe = 2 * time.Second
	// stallGrace covers a leader election that gave up during the stall
	// (controller-runtime renews within 10 s, then stops the manager).
	stallGrace = 20 * time.Second
)

type probe struct {
	mu     sync.Mutex // guards stalls, open
	stalls []report.Fault
	open   *report.Fault // a stall under way
}

// Probe watches the API server until ctx ends: a GET every second, through
// the harness's own client.
func (h *Hub) Probe(ctx context.Context) {
	h.wg.Go(func() {
		for {
			start := time.Now()
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := h.client().core.CoreV1().Namespaces().Get(pctx, "default", getOptions)
			cancel()
			if ctx.Err() != nil {
				return
			}
			h.probe.record(start, err != nil || time.Since(start) > SlowProbe)
			select {
			case <-ctx.Done():
				return
			case <-time.After(probeEvery):
			}
		}
	})
}

func (p *probe) record(start time.Time, stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case stalled && p.open == nil:
		p.open = &report.Fault{Kind: "apiserver-stall", Scope: "all", Start: start, Grace: stallGrace}
	case !stalled && p.open != nil:
		p.open.End = time.Now()
		p.stalls = append(p.stalls, *p.open)
		p.open = nil
	}
}

// Stalls are the stalls the probe saw, one under way included (ending now).
func (h *Hub) Stalls() []report.Fault {
	h.probe.mu.Lock()
	defer h.probe.mu.Unlock()
	out := append([]report.Fault(nil), h.probe.stalls...)
	if h.probe.open != nil {
		f := *h.probe.open
		f.End = time.Now()
		out = append(out, f)
	}
	return out
}
