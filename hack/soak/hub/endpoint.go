package hub

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authvault/authvault/hack/soak/plugin"
)

// Mode is how a token endpoint behaves: the plugin's faults.
type Mode int32

const (
	Serving   Mode = iota // issues a token after the plugin's latency
	Failing               // answers 503: the cloud's token service fails
	Hanging               // answers nothing until the mode changes: a plugin that hangs
	Partition             // drops the connection: the token service is unreachable
)

// endpoint is one side's token endpoint: what its exec plugin fetches. Each
// side has its own, so that its plugin's runs are counted apart.
type endpoint struct {
	hub     *Hub
	latency time.Duration
	srv     *httptest.Server
	hits    atomic.Int64

	mu      sync.Mutex // guards mode, changed, issued
	mode    Mode
	changed chan struct{} // closed when mode changes
	issued  []issued      // tokens it gave, not yet expired
}

type issued struct {
	token   string
	expires time.Time
}

func newEndpoint(h *Hub, latency time.Duration) *endpoint {
	e := &endpoint{hub: h, latency: latency, changed: make(chan struct{})}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	return e
}

func (e *endpoint) setMode(m Mode) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mode == m {
		return
	}
	e.mode = m
	close(e.changed)
	e.changed = make(chan struct{})
}

// live is every token the endpoint gave that has not expired yet.
func (e *endpoint) live() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	kept := e.issued[:0]
	var out []string
	for _, t := range e.issued {
		if now.Before(t.expires) {
			kept = append(kept, t)
			out = append(out, t.token)
		}
	}
	e.issued = kept
	return out
}

func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	e.hits.Add(1)
	select {
	case <-time.After(e.latency):
	case <-r.Context().Done():
		return
	}
	for {
		e.mu.Lock()
		mode, changed := e.mode, e.changed
		e.mu.Unlock()
		switch mode {
		case Failing:
			http.Error(w, "token service unavailable", http.StatusServiceUnavailable)
			return
		case Partition:
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			http.Error(w, "unreachable", http.StatusBadGateway)
			return
		case Hanging:
			select {
			case <-changed:
				continue
			case <-r.Context().Done():
				return
			}
		}
		break
	}
	life := e.hub.tokenLife()
	tok := e.hub.issue(life)
	e.mu.Lock()
	e.issued = append(e.issued, issued{token: tok, expires: time.Now().Add(life)})
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(plugin.Answer{Token: tok, Expires: time.Now().Add(life).UTC().Format(time.RFC3339)})
}

func (e *endpoint) close() {
	e.setMode(Serving) // releases hanging runs
	e.srv.Close()
}

// tokenLife is a random life between the options' bounds.
func (h *Hub) tokenLife() time.Duration {
	lo, hi := h.opts.MinTokenLife, h.opts.MaxTokenLife
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rand.Int64N(int64(hi-lo)))
}
