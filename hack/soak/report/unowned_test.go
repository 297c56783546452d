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
	tallyUnowned(&tally, f, ownership)
	if tally.Unowned != 4 || tally.UnownedFor != 11*time.Second || tally.PastEnd != 2*time.Second {
		t.Errorf("tally %+v: want 4 samples, 11s longest, 2s past the end", tally)
	}
}
