package side

import (
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testwait"
)

// runFor is how long a side runs in a test: two lives of its hub tokens.
const runFor = 2 * tokenTTL

// settleBound is how long a side may take to join its clusters and serve
// each kind of request: a first login, an informer's sync, a leader
// election and the first exec stream, on a busy machine.
const settleBound = 3 * testwait.Hang

func TestSidesServeWithoutFailure(t *testing.T) {
	h := startHub(t)
	sides := map[string]*running{}
	for _, role := range []string{wire.RoleAuthvault, wire.RoleClientGo} {
		sides[role] = start(t, h.newSide(t, role))
	}
	began := time.Now()
	for role, r := range sides {
		if !r.waitFor(settleBound, settled) {
			s, _ := r.last()
			t.Fatalf("%s: not settled after %v: %+v; failures: %+v", role, settleBound, s, r.failuresNow())
		}
	}
	time.Sleep(time.Until(began.Add(runFor)))
	for _, r := range sides {
		r.stop(t)
	}

	for role, r := range sides {
		r.checkNoSecret(t)
		for _, f := range r.failures {
			t.Errorf("%s: a failure with nothing wrong: %+v", role, f)
		}
		if len(r.samples) < 3 {
			t.Fatalf("%s: %d samples in %v, every %v", role, len(r.samples), runFor, r.side.cfg.SampleEvery)
		}
		first, last := r.samples[0], r.samples[len(r.samples)-1]
		if last.Goroutines <= 0 || last.FDs <= 0 || last.Conns <= 0 || last.Series <= 0 || last.HeapInUse == 0 {
			t.Errorf("%s: a last sample with a resource at zero: %+v", role, last)
		}
		if last.Requests <= first.Requests {
			t.Errorf("%s: requests did not grow: %d, then %d", role, first.Requests, last.Requests)
		}
		if last.LogLines <= 0 {
			t.Errorf("%s: no log line (the fleet logs its clusters joining): %+v", role, last)
		}
		var sum int64
		for _, n := range last.Successes {
			sum += n
		}
		if sum != last.Requests {
			t.Errorf("%s: successes by component add up to %d, requests are %d", role, sum, last.Requests)
		}
		t.Logf("%s: last sample %+v", role, last)
	}
	if s, _ := sides[wire.RoleAuthvault].last(); s.Logins <= 0 {
		t.Errorf("authvault: no login counted: %+v", s)
	}
	if s, _ := sides[wire.RoleClientGo].last(); s.Logins != 0 {
		t.Errorf("client-go: %d logins counted, which only a vault's metric gives", s.Logins)
	}
}

// TestRevokedPluginTokens revokes every token of the hub's exec plugin
// and stops it issuing more: client-go, whose one way to authenticate is
// the plugin, sees 401s; authvault's vault goes on with its token file.
// The plugin's tokens live ten minutes here, so that what client-go meets
// is the revocation, not an expiry (at which it runs the failing plugin
// before any request is sent: a failure of another kind).
func TestRevokedPluginTokens(t *testing.T) {
	h := startHub(t)
	sides := map[string]*running{}
	for _, role := range []string{wire.RoleAuthvault, wire.RoleClientGo} {
		s := h.newSide(t, role)
		s.pluginTTL.Store(int64(10 * time.Minute))
		sides[role] = start(t, s)
	}
	for role, r := range sides {
		if !r.waitFor(settleBound, settled) {
			s, _ := r.last()
			t.Fatalf("%s: not settled after %v: %+v; failures: %+v", role, settleBound, s, r.failuresNow())
		}
	}
	faultAt := time.Now()
	for _, r := range sides {
		r.side.revokePlugin()
	}
	cg := sides[wire.RoleClientGo]
	unauthorized := func(wire.Sample) bool {
		for _, f := range cg.failuresNow() {
			if f.Kind == kindUnauthorized && f.Component == compHub {
				return true
			}
		}
		return false
	}
	if !cg.waitFor(testcluster.ReviewCacheTTL+testwait.Hang, unauthorized) {
		t.Errorf("client-go: no 401 on the hub after its plugin's tokens were revoked: %+v", cg.failuresNow())
	}
	// Past the API server's review cache, every request with a plugin
	// token meets a 401: the authvault side must serve on through it.
	av := sides[wire.RoleAuthvault]
	time.Sleep(time.Until(faultAt.Add(testcluster.ReviewCacheTTL)))
	before, _ := av.last()
	if !av.waitFor(testwait.Hang, func(s wire.Sample) bool { return s.Successes[compHub] >= before.Successes[compHub]+20 }) {
		after, _ := av.last()
		t.Errorf("authvault: the hub's requests stopped after the revocation: %d, then %d", before.Successes[compHub], after.Successes[compHub])
	}
	for _, r := range sides {
		r.stop(t)
	}

	profile := av.side.cfg.ProfilesNamespace + "/p0"
	for _, f := range av.failures {
		// The profile's cluster is the plugin's alone.
		if f.Component != compFleet || f.Cluster != profile {
			t.Errorf("authvault: a failure the token file should have spared: %+v", f)
		}
	}
	for role, r := range sides {
		r.checkNoSecret(t)
		byKind := map[string]int{}
		for _, f := range r.failures {
			byKind[f.Component+"/"+f.Kind]++
		}
		t.Logf("%s: failures by component and kind after the revocation: %v", role, byKind)
		for _, f := range r.failures {
			if f.At.Before(faultAt) {
				t.Errorf("%s: a failure before the fault: %+v", role, f)
			}
			if f.Kind == "" || f.Message == "" {
				t.Errorf("%s: a failure without a kind or message: %+v", role, f)
			}
		}
	}
}
