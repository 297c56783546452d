package report

import (
	"slices"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// DefaultWindow is how much of a run a baseline or an end is read over
// when Run.Window is zero: a few samples, so that one sample's requests in
// flight (a goroutine and a connection each) neither set the baseline nor
// keep a side from coming back to it.
const DefaultWindow = 20 * time.Second

func (r *Run) window() time.Duration {
	if r.Window > 0 {
		return r.Window
	}
	return DefaultWindow
}

// BaselineOf is the typical sample of [from, to]: each count its median
// there. ok is false when no sample falls in the window.
func BaselineOf(samples []wire.Sample, from, to time.Time) (s wire.Sample, ok bool) {
	in := within(samples, from, to)
	if len(in) == 0 {
		return s, false
	}
	median := func(of func(wire.Sample) int) int {
		v := make([]int, len(in))
		for i, x := range in {
			v[i] = of(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	s = in[len(in)-1]
	s.Goroutines = median(func(x wire.Sample) int { return x.Goroutines })
	s.FDs = median(func(x wire.Sample) int { return x.FDs })
	s.Conns = median(func(x wire.Sample) int { return x.Conns })
	s.Series = median(func(x wire.Sample) int { return x.Series })
	s.HeapInUse = uint64(median(func(x wire.Sample) int { return int(x.HeapInUse) }))
	return s, true
}

// FloorOf is the least of [from, to]: each count its minimum there. What
// a side holds for good (a leak) raises the floor; what it holds for a
// request in flight does not. ok is false when no sample falls in the
// window.
func FloorOf(samples []wire.Sample, from, to time.Time) (s wire.Sample, ok bool) {
	in := within(samples, from, to)
	if len(in) == 0 {
		return s, false
	}
	s = in[len(in)-1]
	for _, x := range in {
		s.Goroutines, s.FDs, s.Conns = min(s.Goroutines, x.Goroutines), min(s.FDs, x.FDs), min(s.Conns, x.Conns)
		s.Series, s.HeapInUse = min(s.Series, x.Series), min(s.HeapInUse, x.HeapInUse)
	}
	return s, true
}

func within(samples []wire.Sample, from, to time.Time) []wire.Sample {
	var in []wire.Sample
	for _, s := range samples {
		if !s.At.Before(from) && !s.At.After(to) {
			in = append(in, s)
		}
	}
	return in
}

// baselineAndEnd are a side's baseline (BaselineOf the window before
// Settled, else its first sample from Settled on) and its end (FloorOf the
// window before End, else its last sample); ok is false when it has no
// sample from Settled on.
func baselineAndEnd(r *Run, samples []wire.Sample) (baseline, end wire.Sample, ok bool) {
	after := settled(r, samples)
	if len(after) == 0 {
		return baseline, end, false
	}
	w := r.window()
	if baseline, ok = BaselineOf(samples, r.Settled.Add(-w), r.Settled); !ok {
		baseline = after[0]
	}
	if end, ok = FloorOf(samples, r.End.Add(-w), r.End); !ok {
		end = samples[len(samples)-1]
	}
	return baseline, end, true
}

// Clear is when the last of faults' graces ends: from then on a failure
// is unexplained, so the run has to go on a while past it for what callers
// meet after the faults to be checked at all. Zero when there is no fault.
func Clear(faults []Fault) time.Time {
	var clear time.Time
	for _, f := range faults {
		if end := f.End.Add(f.Grace); end.After(clear) {
			clear = end
		}
	}
	return clear
}

// intermittent are the components whose successes are too rare to ask one
// of every window: a watch counts one success when it opens, and stays
// open for minutes.
var intermittent = []string{"watch"}

// Silent names, sorted, the components that succeeded in the window before
// settled and not once in [since, now] (samples in the order taken):
// whatever broke them, they do not fail either, so no failure shows it (a
// lease lost and never taken again, a caller stuck). "operator" is the
// operator's reconciles.
func Silent(samples []wire.Sample, settled time.Time, window time.Duration, since, now time.Time) []string {
	var silent []string
	for _, c := range components(samples) {
		if slices.Contains(intermittent, c) {
			continue
		}
		if rose(samples, c, settled.Add(-window), settled) && !rose(samples, c, since, now) {
			silent = append(silent, c)
		}
	}
	return silent
}

// components are the components samples count successes of, sorted.
func components(samples []wire.Sample) []string {
	var cs []string
	if len(samples) > 0 {
		cs = append(cs, "operator")
	}
	for _, s := range samples {
		for c := range s.Successes {
			if !slices.Contains(cs, c) {
				cs = append(cs, c)
			}
		}
	}
	slices.Sort(cs)
	return cs
}

// rose reports whether c's count grew over [from, to]: from the last
// sample at or before from (else the first in the window) to the last at
// or before to.
func rose(samples []wire.Sample, c string, from, to time.Time) bool {
	count := func(s wire.Sample) int64 {
		if c == "operator" {
			return s.Reconciled
		}
		return s.Successes[c]
	}
	var first, last *wire.Sample
	for i := range samples {
		s := &samples[i]
		if s.At.After(to) {
			break
		}
		if !s.At.After(from) || first == nil {
			first = s
		}
		last = s
	}
	if first == nil {
		return false
	}
	// A side started again (the shard peer) counts from zero again: a count
	// below the first is a new process's, which rose from zero.
	return count(*last) > count(*first) || (count(*last) < count(*first) && count(*last) > 0)
}
