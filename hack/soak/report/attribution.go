package report

import (
	"slices"
	"strings"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
	"github.com/authvault/authvault/redact"
)

// hubComponents are the components that run on the hub's own credentials:
// what a fault of scope "hub" may break.
var hubComponents = []string{"hub", "watch", "exec", "operator", "addon"}

// covers reports whether a fault of scope may break x's component.
func covers(scope string, x wire.Failure) bool {
	if x.Kind == "no-cluster" {
		// Only a fault on that cluster — its Secret or profile deleted —
		// makes the fleet lose it; anything else that does is a finding.
		return x.Component == "fleet" && scope == "cluster:"+x.Cluster
	}
	switch x.Kind {
	case "two-owners":
		return false // what sharding promises never happens, whatever the fault
	case "unowned":
		// A replica killed, or the hub away: Leases that are not renewed
		// are clusters let go before they are taken. And a cluster whose
		// Secret is deleted has left the fleet: no replica owns it.
		return scope == "all" || scope == "hub" || scope == "fleet" || scope == "cluster:"+x.Cluster
	}
	switch {
	case scope == "all":
		return true
	case scope == "fleet":
		return false // a replica killed explains its clusters going unowned, nothing else
	case scope == "hub":
		return slices.Contains(hubComponents, x.Component)
	case strings.HasPrefix(scope, "namespace:"):
		return x.Component == "fleet" && strings.HasPrefix(x.Cluster, strings.TrimPrefix(scope, "namespace:")+"/")
	case strings.HasPrefix(scope, "cluster:"):
		return x.Component == "fleet" && x.Cluster == strings.TrimPrefix(scope, "cluster:")
	}
	return false
}

// explains reports whether f explains x: x happened within f's window,
// its grace included, and within its scope.
func (f Fault) explains(x wire.Failure) bool {
	return !x.At.Before(f.Start) && !x.At.After(f.End.Add(f.Grace)) && covers(f.Scope, x)
}

// Failures are one component's failures of one kind on a side.
type Failures struct {
	Component, Kind string
	Explained       int
	// By counts the explained failures by the kinds of faults that explain
	// them; a failure two faults explain counts for each.
	By          map[string]int
	Unexplained int
}

// Unexplained is one failure no fault explains, as the report lists it:
// its Message with any URL's user info hidden.
type Unexplained struct {
	Since time.Duration // since Run.Start
	wire.Failure
}

// maxListed is how many unexplained failures a side's summary keeps.
const maxListed = 10

// attribute tallies s's failures by component and kind, sorted, and
// returns the first unexplained ones and how many there were.
func attribute(r *Run, s *Side) (tally []Failures, first []Unexplained, unexplained int) {
	index := map[[2]string]int{}
	for _, x := range s.Failures {
		key := [2]string{x.Component, x.Kind}
		i, ok := index[key]
		if !ok {
			i = len(tally)
			index[key] = i
			tally = append(tally, Failures{Component: x.Component, Kind: x.Kind, By: map[string]int{}})
		}
		t := &tally[i]
		var by []string
		for _, f := range r.Faults {
			if f.explains(x) && !slices.Contains(by, f.Kind) {
				by = append(by, f.Kind)
			}
		}
		if len(by) == 0 {
			t.Unexplained++
			unexplained++
			x.Message = redact.URL(x.Message)
			first = append(first, Unexplained{Since: x.At.Sub(r.Start), Failure: x})
			continue
		}
		t.Explained++
		for _, k := range by {
			t.By[k]++
		}
	}
	slices.SortFunc(tally, func(a, b Failures) int {
		return strings.Compare(a.Component+"\x00"+a.Kind, b.Component+"\x00"+b.Kind)
	})
	slices.SortStableFunc(first, func(a, b Unexplained) int { return a.At.Compare(b.At) })
	return tally, first[:min(len(first), maxListed)], unexplained
}
