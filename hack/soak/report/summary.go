package report

import (
	"slices"
	"strings"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// Summary is what a run shows, side by side: it is computed once by
// Summarize and read-only after.
type Summary struct {
	Start, Settled, FaultsEnd, End time.Time
	// Clear is when the last fault's grace ended (Clear of Run.Faults),
	// Window Run.Window: a run checks what came after its faults only when
	// it goes on a Window past Clear.
	Clear    time.Time
	Window   time.Duration
	Clusters int
	Shared   []string // Run.Shared
	// Sides are authvault's first, then client-go's, then any other by
	// role.
	Sides  []*SideSummary
	Faults []FaultTally
}

// SideSummary is what one side's records show.
type SideSummary struct {
	Role string
	// Samples is how many samples the side wrote.
	Samples int
	// Baseline is the side's typical sample over the Run.Window before
	// Run.Settled (each count's median), Final its least over the window
	// before Run.End (each count's minimum); HasBaseline is false when the
	// side has no sample from Settled on.
	Baseline, Final wire.Sample
	HasBaseline     bool
	// Failures are by component and kind, sorted.
	Failures []Failures
	// Unexplained is how many failures no fault explains; First lists the
	// earliest few of them.
	Unexplained int
	First       []Unexplained
	// Silent names the components that succeeded before the faults and
	// not once from Summary.Clear to the end (Silent).
	Silent []string
	// Resources is indexed by Metric.
	Resources []Resource
	Rates
	// Leaked is Side.Leaked: where the side's output held a secret.
	Leaked []string
}

// FaultTally is how many times the harness caused a kind of fault, and
// for how long in all.
type FaultTally struct {
	Kind  string
	Count int
	Total time.Duration
	// Unowned counts, over the faults of the kind, the samples that found
	// a cluster no replica of a shared fleet owned which the fault
	// explains; UnownedFor is the longest one cluster went so within one
	// fault, and PastEnd how long after its fault's end the last such
	// sample came (0 when none came after it).
	Unowned             int
	UnownedFor, PastEnd time.Duration
}

// Summarize reads r. Samples and failures may come in any order.
func Summarize(r *Run) *Summary {
	s := &Summary{Start: r.Start, Settled: r.Settled, FaultsEnd: r.FaultsEnd, End: r.End, Clusters: r.Clusters, Shared: r.Shared,
		Clear: Clear(r.Faults), Window: r.window()}
	ownership := ownershipFailures(r)
	for _, role := range roles(r) {
		side := r.Sides[role]
		if found := ownership[role]; len(found) > 0 {
			with := *side
			with.Failures = append(slices.Clone(side.Failures), found...)
			side = &with
		}
		s.Sides = append(s.Sides, summarizeSide(r, role, side))
	}
	index := map[string]int{}
	for _, f := range r.Faults {
		i, ok := index[f.Kind]
		if !ok {
			i = len(s.Faults)
			index[f.Kind] = i
			s.Faults = append(s.Faults, FaultTally{Kind: f.Kind})
		}
		s.Faults[i].Count++
		s.Faults[i].Total += f.End.Sub(f.Start)
		tallyUnowned(&s.Faults[i], f, r.Faults, ownership)
	}
	slices.SortFunc(s.Faults, func(a, b FaultTally) int { return strings.Compare(a.Kind, b.Kind) })
	return s
}

// tallyUnowned adds to t the unowned samples of ownership that f explains.
// A sample past f's end counts in PastEnd only when no other fault of all
// is under way then, and none that ended later explains it too: it is f's
// tail, not the next fault's doing.
func tallyUnowned(t *FaultTally, f Fault, all []Fault, ownership map[string][]wire.Failure) {
	first, last := map[string]time.Time{}, map[string]time.Time{}
	for _, found := range ownership {
		for _, x := range found {
			if x.Kind != "unowned" || !f.explains(x) {
				continue
			}
			t.Unowned++
			if !underWay(all, x.At) && !explainedLater(all, f, x) {
				t.PastEnd = max(t.PastEnd, x.At.Sub(f.End))
			}
			if at, ok := first[x.Cluster]; !ok || x.At.Before(at) {
				first[x.Cluster] = x.At
			}
			if x.At.After(last[x.Cluster]) {
				last[x.Cluster] = x.At
			}
		}
	}
	for name, at := range first {
		t.UnownedFor = max(t.UnownedFor, last[name].Sub(at))
	}
}

// explainedLater tells whether a fault of all that ended after f explains
// x too.
func explainedLater(all []Fault, f Fault, x wire.Failure) bool {
	for _, g := range all {
		if g.End.After(f.End) && g.explains(x) {
			return true
		}
	}
	return false
}

// underWay tells whether a fault of all is under way at t (its grace
// aside).
func underWay(all []Fault, t time.Time) bool {
	for _, f := range all {
		if !t.Before(f.Start) && !t.After(f.End) {
			return true
		}
	}
	return false
}

// roles are r's sides in the order the report shows them.
func roles(r *Run) []string {
	var rs []string
	for role := range r.Sides {
		rs = append(rs, role)
	}
	rank := func(role string) int {
		switch role {
		case wire.RoleAuthvault:
			return 0
		case wire.RoleClientGo:
			return 1
		}
		return 2
	}
	slices.SortFunc(rs, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return rs
}

// summarizeSide reads side, the side of role.
func summarizeSide(r *Run, role string, side *Side) *SideSummary {
	samples := slices.SortedStableFunc(slices.Values(side.Samples), func(a, b wire.Sample) int { return a.At.Compare(b.At) })
	sorted := *side
	sorted.Samples, sorted.Role = samples, role
	ss := &SideSummary{Role: role, Samples: len(samples), Leaked: side.Leaked}
	ss.Baseline, ss.Final, ss.HasBaseline = baselineAndEnd(r, samples)
	ss.Failures, ss.First, ss.Unexplained = attribute(r, side)
	if clear := Clear(r.Faults); !clear.IsZero() {
		ss.Silent = Silent(samples, r.Settled, r.window(), clear, r.End)
	}
	for _, m := range metrics {
		ss.Resources = append(ss.Resources, resource(r, samples, m))
	}
	ss.Rates = rates(r, &sorted)
	return ss
}

// Side is the summary of the side of role, or nil.
func (s *Summary) Side(role string) *SideSummary {
	for _, ss := range s.Sides {
		if ss.Role == role {
			return ss
		}
	}
	return nil
}
