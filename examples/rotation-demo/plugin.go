package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authvault/authvault/testkit/testcluster"
)

// The demo is also its own credential plugin: client-go and the vault run
// the demo's binary with these variables set, and it prints the token it
// fetched from one side's issuer endpoint.
const (
	pluginModeEnv = "PLUGIN_MODE" // "fetch"
	pluginURLEnv  = "PLUGIN_FETCH_URL"
)

// plugin fetches a token and prints an ExecCredential. It writes nothing to
// stderr when the issuer fails: client-go and the vault pass a plugin's
// stderr on to the demo's, and the exit code is what both act on.
func plugin(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 1
	}
	defer resp.Body.Close()
	var got struct {
		Token   string `json:"token"`
		Expires string `json:"expires"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&got) != nil || got.Token == "" {
		return 1
	}
	status := map[string]string{"token": got.Token}
	if got.Expires != "" {
		status["expirationTimestamp"] = got.Expires
	}
	err = json.NewEncoder(os.Stdout).Encode(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status,
	})
	if err != nil {
		return 1
	}
	return 0
}

// pluginRun is one run of a side's plugin, as its issuer endpoint saw it.
type pluginRun struct {
	start, end time.Time
	ok         bool // it got a token
}

// endpoint is one side's token issuer: what its plugin fetches. Each side
// has its own, so that runs are counted per side; both issue tokens of the
// cluster's issuer, which the API server asks about every token.
type endpoint struct {
	// Set by newEndpoint, read-only afterwards.
	issuer      *testcluster.Issuer
	ttl         time.Duration // tokens expire this long after their issue; 0: never
	revokeAfter time.Duration // tokens are revoked this long after their issue; 0: never
	latency     time.Duration // how long a run takes, success or failure
	down        *atomic.Bool  // the issuer's outage, shared by both sides
	srv         *httptest.Server

	mu   sync.Mutex // guards runs
	runs []pluginRun
}

func newEndpoint(issuer *testcluster.Issuer, ttl, revokeAfter, latency time.Duration, down *atomic.Bool) *endpoint {
	e := &endpoint{issuer: issuer, ttl: ttl, revokeAfter: revokeAfter, latency: latency, down: down}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	return e
}

// serve is one run of the plugin: it takes the plugin's latency (a real
// plugin's call to its cloud's token service), then fails if the issuer is
// down at its end, or issues a token whose expiry counts from then.
func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	select {
	case <-time.After(e.latency):
	case <-r.Context().Done():
		return
	}
	if e.down.Load() {
		e.record(pluginRun{start: start, end: time.Now()})
		http.Error(w, "issuer unavailable", http.StatusServiceUnavailable)
		return
	}
	resp := map[string]string{"token": e.issuer.IssueRevoking(e.ttl, e.revokeAfter)}
	if e.ttl > 0 {
		resp["expires"] = time.Now().Add(e.ttl).UTC().Format(time.RFC3339)
	}
	e.record(pluginRun{start: start, end: time.Now(), ok: true})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (e *endpoint) record(r pluginRun) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs = append(e.runs, r)
}

// Runs are the plugin's runs so far.
func (e *endpoint) Runs() []pluginRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]pluginRun(nil), e.runs...)
}

func (e *endpoint) URL() string { return e.srv.URL }

// Close stops the endpoint, once the plugins it serves are done.
func (e *endpoint) Close() { e.srv.Close() }
