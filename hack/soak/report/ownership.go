package report

import (
	"slices"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// ownershipFailures reads the Owned lists of the replicas that share the
// fleet (r.Shared) and finds what callers would meet though no read
// failed: a cluster no replica owned ("unowned", at each sample of the
// first shared role, after the run settled) and a cluster two replicas
// owned at once ("two-owners": one replica owned it in a sample of its
// own, and the other in both of its samples around that one). Every
// replica's Owned counts only while its samples are fresh: a replica
// killed owns nothing. The failures go to the role that saw them; a fault
// may explain "unowned" (a replica killed, the hub away), never
// "two-owners".
func ownershipFailures(r *Run) map[string][]wire.Failure {
	if len(r.Shared) < 2 {
		return nil
	}
	samples := map[string][]wire.Sample{}
	everyOwned := map[string]bool{}
	for _, role := range r.Shared {
		side := r.Sides[role]
		if side == nil {
			continue
		}
		samples[role] = slices.SortedStableFunc(slices.Values(side.Samples), func(a, b wire.Sample) int { return a.At.Compare(b.At) })
		for _, s := range side.Samples {
			for _, name := range s.Owned {
				everyOwned[name] = true
			}
		}
	}
	clusters := slices.Sorted(func(yield func(string) bool) {
		for name := range everyOwned {
			if !yield(name) {
				return
			}
		}
	})
	out := map[string][]wire.Failure{}
	first := r.Shared[0]
	for _, tick := range samples[first] {
		if tick.At.Before(r.Settled) {
			continue
		}
		owned := map[string]bool{}
		for _, role := range r.Shared {
			if s, ok := freshAt(samples[role], tick.At); ok {
				for _, name := range s.Owned {
					owned[name] = true
				}
			}
		}
		for _, name := range clusters {
			if !owned[name] {
				out[first] = append(out[first], wire.Failure{At: tick.At, Component: "fleet", Cluster: name, Kind: "unowned",
					Message: "no replica of the fleet owned the cluster"})
			}
		}
	}
	for _, a := range r.Shared {
		for _, b := range r.Shared {
			if a == b {
				continue
			}
			for _, s := range samples[b] {
				for _, name := range s.Owned {
					if ownedAround(samples[a], s.At, name) {
						out[b] = append(out[b], wire.Failure{At: s.At, Component: "fleet", Cluster: name, Kind: "two-owners",
							Message: "owned by " + b + " while " + a + " owned it before and after"})
					}
				}
			}
		}
	}
	return out
}

// freshAt is the last of samples at or before t, when it is no older than
// three of the gaps between them: a side that stopped sampling (killed)
// owns nothing.
func freshAt(samples []wire.Sample, t time.Time) (wire.Sample, bool) {
	i, _ := slices.BinarySearchFunc(samples, t, func(s wire.Sample, t time.Time) int {
		if s.At.After(t) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return wire.Sample{}, false
	}
	s := samples[i-1]
	return s, t.Sub(s.At) <= 3*gap(samples)
}

// gap is the median time between two samples.
func gap(samples []wire.Sample) time.Duration {
	if len(samples) < 2 {
		return 0
	}
	gaps := make([]time.Duration, 0, len(samples)-1)
	for i := 1; i < len(samples); i++ {
		gaps = append(gaps, samples[i].At.Sub(samples[i-1].At))
	}
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}

// ownedAround says whether name is in the Owned of the two samples that
// bracket t (the last before it and the first after it, close enough to
// say the side sampled all along): the side owned it across t.
func ownedAround(samples []wire.Sample, t time.Time, name string) bool {
	// The first at or after t, and the first after t.
	i, _ := slices.BinarySearchFunc(samples, t, func(s wire.Sample, t time.Time) int { return s.At.Compare(t) })
	j := i
	for j < len(samples) && !samples[j].At.After(t) {
		j++
	}
	if i == 0 || j == len(samples) {
		return false
	}
	before, after := samples[i-1], samples[j]
	if after.At.Sub(before.At) > 3*gap(samples) {
		return false
	}
	return slices.Contains(before.Owned, name) && slices.Contains(after.Owned, name)
}
