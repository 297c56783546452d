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
