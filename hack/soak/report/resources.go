package report

import (
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/authvault/authvault/hack/soak/wire"
)

// Resource is how one metric of a side moved over the run.
type Resource struct {
	Metric Metric
	// Baseline and Final are the side's (SideSummary.Baseline, Final);
	// Min and Max are over the samples from Run.Settled on.
	Baseline, Min, Max, Final float64
	// Slope is the least-squares slope of the samples in the second half
	// of the run, in the metric's unit per hour; SlopePercent is Slope as
	// a percentage of that half's mean. Both are NaN when the half has
	// fewer than two samples.
	Slope, SlopePercent float64
	// HalfSamples is how many samples the slope is drawn through.
	HalfSamples int
}

// settled is the samples from the first at or after r.Settled on.
func settled(r *Run, samples []wire.Sample) []wire.Sample {
	for i, s := range samples {
		if !s.At.Before(r.Settled) {
			return samples[i:]
		}
	}
	return nil
}

// resource measures m over samples, which are sorted by time.
func resource(r *Run, samples []wire.Sample, m Metric) Resource {
	res := Resource{Metric: m, Slope: math.NaN(), SlopePercent: math.NaN()}
	after := settled(r, samples)
	if len(after) == 0 {
		return res
	}
	baseline, end, _ := baselineAndEnd(r, samples)
	res.Baseline, res.Final = m.of(baseline), m.of(end)
	res.Min, res.Max = m.of(after[0]), m.of(after[0])
	for _, s := range after {
		res.Min, res.Max = min(res.Min, m.of(s)), max(res.Max, m.of(s))
	}

	half := r.Start.Add(r.End.Sub(r.Start) / 2)
	var in []wire.Sample
	for _, s := range samples {
		if !s.At.Before(half) && !s.At.After(r.End) {
			in = append(in, s)
		}
	}
	res.HalfSamples = len(in)
	hours, values := bucketMedians(in, half, r.End.Sub(half)/slopeBuckets, m)
	if len(values) < 2 {
		return res
	}
	_, res.Slope = stat.LinearRegression(hours, values, nil, false)
	res.SlopePercent = 0 // counts whose mean is 0 are 0 throughout
	if mean := stat.Mean(values, nil); mean != 0 {
		res.SlopePercent = res.Slope / mean * 100
	}
	return res
}

// slopeBuckets is how many stretches the second half is cut into for its
// slope: the line goes through each stretch's median, not through every
// sample. A fault swings the counts by half their level for a minute
// (connections and goroutines fall with the API server, rise with the
// requests that waited on it): through every sample, the 60-min soak's
// line came out at ±13 %/h with nothing leaking, three times the figure's
// own standard error, while its 3-minute medians stayed within 2 % of one
// another. A leak moves every median; a fault moves one stretch's samples.
const slopeBuckets = 10

// bucketMedians cuts samples (from start on) into stretches of width and
// returns each stretch's middle, in hours since start, and its median of m.
func bucketMedians(samples []wire.Sample, start time.Time, width time.Duration, m Metric) (hours, values []float64) {
	if width <= 0 {
		return nil, nil
	}
	buckets := map[int][]float64{}
	for _, s := range samples {
		i := min(int(s.At.Sub(start)/width), slopeBuckets-1) // the sample at the end
		buckets[i] = append(buckets[i], m.of(s))
	}
	for i := range slopeBuckets {
		v := buckets[i]
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		hours = append(hours, (time.Duration(i)*width + width/2).Hours())
		values = append(values, v[len(v)/2])
	}
	return hours, values
}

// Rates are a side's activity per unit of time.
type Rates struct {
	// LogLinesPerClusterHour is the log lines the side wrote from its
	// baseline sample to its last, per hour, per cluster: the fleet's
	// clusters and the hub as one more.
	LogLinesPerClusterHour float64
	// LoginsPerHour is the side's logins over the run (authvault: its
	// logins metric; client-go: its plugin's runs), per hour;
	// PredictedPerHour is what the tokens' lives call for, per hour, and
	// LoginRatio the one over the other (NaN without a prediction).
	LoginsPerHour, PredictedPerHour, LoginRatio float64
	// RequestsPerSecond is the operations that succeeded from the
	// baseline sample to the last, per second.
	RequestsPerSecond float64
}

// rates measures s's rates over r.
func rates(r *Run, s *Side) Rates {
	rt := Rates{LoginRatio: math.NaN()}
	run := r.End.Sub(r.Start)
	logins := float64(s.PluginRuns)
	if (s.Role == wire.RoleAuthvault || slices.Contains(r.Shared, s.Role)) && len(s.Samples) > 0 {
		logins = float64(loginsOf(s.Samples))
	}
	rt.LoginsPerHour = perHour(logins, run)
	rt.PredictedPerHour = perHour(s.PredictedLogins, run)
	if s.PredictedLogins > 0 {
		rt.LoginRatio = logins / s.PredictedLogins
	}
	after := settled(r, s.Samples)
	if len(after) < 2 {
		return rt
	}
	first, last := after[0], after[len(after)-1]
	span := last.At.Sub(first.At)
	lines := counted(after, func(s wire.Sample) int64 { return s.LogLines }) - first.LogLines
	rt.LogLinesPerClusterHour = perHour(float64(lines), span) / float64(r.Clusters+1)
	if span > 0 {
		requests := counted(after, func(s wire.Sample) int64 { return s.Requests }) - first.Requests
		rt.RequestsPerSecond = float64(requests) / span.Seconds()
	}
	return rt
}

// perHour is n over d, per hour; 0 over no time.
func perHour(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Hours()
}

// loginsOf is the logins samples count, over every process of the side.
func loginsOf(samples []wire.Sample) int64 {
	return counted(samples, func(s wire.Sample) int64 { return s.Logins })
}

// counted is the last of a counter the samples carry, over every process
// of the side: a side started again (the shard peer) counts from zero
// again, and what its earlier process counted is added.
func counted(samples []wire.Sample, counter func(wire.Sample) int64) int64 {
	var total, last int64
	for _, s := range slices.SortedStableFunc(slices.Values(samples), func(a, b wire.Sample) int { return a.At.Compare(b.At) }) {
		if n := counter(s); n < last {
			total += last // a new process
		}
		last = counter(s)
	}
	return total + last
}
