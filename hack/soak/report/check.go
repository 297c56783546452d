package report

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// Bounds are what Summary.Check holds a run to. The zero value checks the
// authvault side with the default tolerance and no slope.
type Bounds struct {
	// Sides are the roles checked. Default: wire.RoleAuthvault alone — the
	// client-go side is the comparison, reported, not gated.
	Sides []string
	// Slope turns the slope check on, for a run long enough that its
	// second half draws a line through noise (the 60-min soak, not the
	// 2-min one).
	Slope bool
	// The largest slope over the second half of the run, in percent of
	// that half's mean per hour, for each metric the slope check covers.
	// Zero means the default: DefaultSlope for goroutines, descriptors and
	// connections, DefaultHeapSlope for the heap.
	GoroutinesSlope, FDsSlope, ConnsSlope, HeapSlope float64
	// Tolerance is how far above its baseline a metric may end.
	Tolerance Tolerance
}

// DefaultSlope is the default bound of the slope of goroutines,
// descriptors and connections, in percent per hour. The leaks a soak is
// there for grow with every rotation (a goroutine per refresh timer, a
// connection per rebuilt transport, a series per rewritten Secret): with
// 50 clusters of 20-60-s tokens that is thousands an hour, hundreds of
// percent of the hundred or so a side holds (a leak of one goroutine per
// login read +855 %/h in a 5-min run). What a flat side reads is set by
// the faults, which swing these counts by half their level for a minute
// at a time: through the 60-min run's second half, with nothing leaking,
// the line through ten stretches' medians read up to 16 %/h either way.
// The bound is above that and far below a leak; a leak of one per hour's
// handful of events (one per CA rotation) stays under it, and a run of
// half an hour cannot tell it from that noise. The example, 1 %/h,
// is a line a few days of samples could draw, not thirty minutes.
const DefaultSlope = 25.0

// DefaultHeapSlope is the default bound of the heap's slope, in percent
// per hour. The heap in use saws with every garbage collection; measured
// on a flat workload, samples scatter 9 % of the mean around their line,
// and the 60-min soak's flat sides read 5 and 11 %/h. The same bound as
// the counts'.
const DefaultHeapSlope = 25.0

// Tolerance is how far above its baseline a count may be and still count
// as back: the larger of Fraction of the baseline and Slack. Being below
// the baseline is always back.
type Tolerance struct {
	// Fraction of the baseline. Default 0.10.
	Fraction float64
	// Slack is the absolute allowance, for small baselines (a handful of
	// connections). Default 5.
	Slack int
}

func (t Tolerance) withDefaults() Tolerance {
	if t.Fraction == 0 {
		t.Fraction = 0.10
	}
	if t.Slack == 0 {
		t.Slack = 5
	}
	return t
}

// bound is the most v may be over a baseline of base.
func (t Tolerance) bound(base int) int {
	return base + max(int(math.Floor(t.Fraction*float64(base))), t.Slack)
}

// backMetrics are the counts that must come back to their baseline once
// the faults stop: the heap may keep what a run taught it (caches of
// bounded size), series their labels.
var backMetrics = []Metric{Goroutines, FDs, Conns}

// over describes each of the counts of now above its bound, one phrase
// each.
func over(baseline, now wire.Sample, t Tolerance) []string {
	t = t.withDefaults()
	var d []string
	for _, m := range backMetrics {
		base, v := int(m.of(baseline)), int(m.of(now))
		if b := t.bound(base); v > b {
			d = append(d, fmt.Sprintf("%s %d, above %d (baseline %d + max(%g %%, %d))", m, v, b, base, t.Fraction*100, t.Slack))
		}
	}
	return d
}

// Back reports whether the goroutines, descriptors and connections of now
// are back within t of baseline: nil when they are, else an error that
// names each one above its bound. The harness calls it while it waits for
// a side to settle after the faults; Check calls it on the last sample.
func Back(baseline, now wire.Sample, t Tolerance) error {
	if d := over(baseline, now, t); len(d) > 0 {
		return errors.New("report: not back to the baseline: " + strings.Join(d, "; "))
	}
	return nil
}

// Check holds the sides b names to b: no unexplained failure, no leaked
// secret, every component that succeeded before the faults succeeding
// again after their graces, back to the baseline at the end, and, when
// b.Slope says so, no slope above its bound; and the run to going on at
// least its Window past the faults' graces, without which nothing after
// the faults is checked. Each error is one line that names the side, what
// failed, its figures and the bound. Nil means the run passed.
func (s *Summary) Check(b Bounds) []error {
	sides := b.Sides
	if len(sides) == 0 {
		sides = []string{wire.RoleAuthvault}
	}
	var errs []error
	if !s.Clear.IsZero() && s.End.Sub(s.Clear) < s.Window {
		errs = append(errs, fmt.Errorf("report: the run ended %v after the faults' graces, less than the %v its end is read over: what callers met after the faults went unchecked",
			max(s.End.Sub(s.Clear), 0).Round(time.Second), s.Window))
	}
	for _, role := range sides {
		ss := s.Side(role)
		if ss == nil {
			errs = append(errs, fmt.Errorf("report: %s side: not in the run", role))
			continue
		}
		errs = append(errs, ss.check(b, s)...)
	}
	return errs
}

// check is Check for one side of s.
func (ss *SideSummary) check(b Bounds, s *Summary) []error {
	clusters := s.Clusters
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("report: %s side: "+format, append([]any{ss.Role}, args...)...))
	}
	if ss.Unexplained > 0 {
		x := ss.First[0]
		where := x.Component
		if x.Cluster != "" {
			where += " " + x.Cluster
		}
		fail("%d unexplained failures, the first %v after the start: %s %s: %s", ss.Unexplained, x.Since, where, x.Kind, x.Message)
	}
	if len(ss.Silent) > 0 {
		fail("%s: no success in the %v since the faults' graces ended, though some in the %v before the faults",
			strings.Join(ss.Silent, ", "), s.End.Sub(s.Clear).Round(time.Second), s.Window)
	}
	for _, where := range ss.Leaked {
		fail("a secret leaked: %s", where)
	}
	if !ss.HasBaseline {
		fail("no sample after the run settled: no baseline")
		return errs
	}
	for _, d := range over(ss.Baseline, ss.Final, b.Tolerance) {
		fail("not back to the baseline at the end: %s", d)
	}
	// A cluster that fails past every fault's grace is explained by the
	// fault that broke it; that it never came back is not.
	if reached, with := s.reached(ss); reached < clusters {
		fail("reaches %d of the fleet's %d clusters at the end%s: one that no fault explains failing any more does not serve either", reached, clusters, with)
	}
	if !b.Slope {
		return errs
	}
	bounds := map[Metric]float64{Goroutines: b.GoroutinesSlope, FDs: b.FDsSlope, Conns: b.ConnsSlope, HeapInUse: b.HeapSlope}
	for _, m := range []Metric{HeapInUse, Goroutines, FDs, Conns} {
		bound := bounds[m]
		if bound == 0 {
			bound = DefaultSlope
			if m == HeapInUse {
				bound = DefaultHeapSlope
			}
		}
		r := ss.Resources[m]
		switch {
		case math.IsNaN(r.SlopePercent):
			fail("%s: no slope: fewer than 2 samples (%d) in the second half of the run", m, r.HalfSamples)
		case r.SlopePercent >= bound:
			fail("%s grew %.2f %%/h over the second half of the run (%+.4g an hour), bound %g %%/h", m, r.SlopePercent, r.Slope, bound)
		}
	}
	return errs
}

// reached is how many clusters ss's side reached at the end: with the
// other replicas of its fleet when it shares the clusters (Shared), and
// then words that say so.
func (s *Summary) reached(ss *SideSummary) (int, string) {
	if !slices.Contains(s.Shared, ss.Role) {
		return ss.Final.Clusters, ""
	}
	n := 0
	for _, role := range s.Shared {
		if o := s.Side(role); o != nil && o.HasBaseline {
			n += o.Final.Clusters
		}
	}
	return n, " with the replicas it shares them with (" + strings.Join(s.Shared, ", ") + ")"
}
