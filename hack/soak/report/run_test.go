package report

import (
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// t0 is the synthetic runs' start.
var t0 = time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)

// every is the synthetic runs' sampling interval.
const every = 5 * time.Second

// flatSample is a side's sample i, steady: the same resources each time,
// counters growing at a fixed rate.
func flatSample(i int) wire.Sample {
	return wire.Sample{
		At:         t0.Add(time.Duration(i) * every),
		HeapInUse:  64 << 20,
		Goroutines: 400,
		FDs:        60,
		Conns:      20,
		Series:     900,
		LogLines:   int64(i) * 3,
		Logins:     int64(i),
		Requests:   int64(i) * 100,
		Clusters:   50,
	}
}

// flatRun is a run of d, settled after a tenth of it, whose sides sample
// every 5 s, each sample passed through edit (nil: flat).
func flatRun(d time.Duration, edit func(i int, s *wire.Sample)) *Run {
	r := &Run{
		Start:     t0,
		Settled:   t0.Add(d / 10),
		FaultsEnd: t0.Add(d * 3 / 4),
		End:       t0.Add(d),
		Clusters:  50,
		Sides:     map[string]*Side{},
	}
	for _, role := range []string{wire.RoleAuthvault, wire.RoleClientGo} {
		s := &Side{Role: role, PluginRuns: 40, PredictedLogins: 20}
		for i := 0; time.Duration(i)*every <= d; i++ {
			sample := flatSample(i)
			if edit != nil {
				edit(i, &sample)
			}
			s.Samples = append(s.Samples, sample)
		}
		r.Sides[role] = s
	}
	return r
}
