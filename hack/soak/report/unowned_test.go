package report

import (
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// The unowned samples a fault explains are tallied under its kind: how
// many, the longest one cluster went unowned in it, and how long past the
// fault's end the last came; a sample no fault explains counts nowhere.
func TestTallyUnownedPerFault(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	f := Fault{Kind: "partition", Scope: "hub", Start: t0, End: t0.Add(20 * time.Second), Grace: 30 * time.Second}
	unowned := func(name string, at time.Duration) wire.Failure {
		return wire.Failure{At: t0.Add(at), Component: "fleet", Cluster: name, Kind: "unowned"}
	}
	ownership := map[string][]wire.Failure{"authvault": {
		unowned("capi/a", 11*time.Second), unowned("capi/a", 16*time.Second), unowned("capi/a", 22*time.Second),
		unowned("capi/b", 12*time.Second),
		unowned("capi/c", 90*time.Second), // past the grace: not this fault's
		{At: t0.Add(13 * time.Second), Component: "fleet", Cluster: "capi/d", Kind: "two-owners"},
	}}
	var tally FaultTally
	tallyUnowned(&tally, f, []Fault{f}, ownership)
	if tally.Unowned != 4 || tally.UnownedFor != 11*time.Second || tally.PastEnd != 2*time.Second {
		t.Errorf("tally %+v: want 4 samples, 11s longest, 2s past the end", tally)
	}
	// A fault under way at 22 s: the sample there is its doing, not the
	// first one's tail.
	next := Fault{Kind: "apiserver-stall", Scope: "hub", Start: t0.Add(21 * time.Second), End: t0.Add(30 * time.Second)}
	tally = FaultTally{}
	tallyUnowned(&tally, f, []Fault{f, next}, ownership)
	if tally.Unowned != 4 || tally.PastEnd != 0 {
		t.Errorf("tally %+v with another fault under way past the first's end: want 4 samples, none past its end", tally)
	}
}

// A sample that a later fault explains too is that one's tail, not the
// earlier's.
func TestTallyUnownedPastEndIsTheLatestFaults(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	hang := Fault{Kind: "plugin-hanging", Scope: "hub", Start: t0, End: t0.Add(30 * time.Second), Grace: 47 * time.Second}
	ca := Fault{Kind: "ca-rotation", Scope: "all", Start: t0.Add(50 * time.Second), End: t0.Add(66 * time.Second), Grace: 30 * time.Second}
	ownership := map[string][]wire.Failure{"authvault": {{At: t0.Add(69 * time.Second), Component: "fleet", Cluster: "capi/a", Kind: "unowned"}}}
	var first, second FaultTally
	tallyUnowned(&first, hang, []Fault{hang, ca}, ownership)
	tallyUnowned(&second, ca, []Fault{hang, ca}, ownership)
	if first.Unowned != 1 || first.PastEnd != 0 || second.PastEnd != 3*time.Second {
		t.Errorf("the hang's tally %+v, the rotation's %+v: want the sample 3 s past the rotation's end, none past the hang's", first, second)
	}
}

// A cluster whose Secret is deleted (secret-recreate, scope the cluster)
// has left the fleet: no replica owns it, and the fault explains that.
func TestSecretRecreateExplainsItsClusterUnowned(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	f := Fault{Kind: "secret-recreate", Scope: "cluster:soak-capi/member-21", Start: t0, End: t0.Add(15 * time.Second)}
	own := wire.Failure{At: t0.Add(5 * time.Second), Component: "fleet", Cluster: "soak-capi/member-21", Kind: "unowned"}
	other := own
	other.Cluster = "soak-capi/member-22"
	if !f.explains(own) || f.explains(other) {
		t.Errorf("explains its own cluster's unowned sample: %v, another's: %v; want true, false", f.explains(own), f.explains(other))
	}
}
