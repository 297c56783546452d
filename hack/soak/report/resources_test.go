package report

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// near reports whether got is want within a millionth of it.
func near(got, want float64) bool { return math.Abs(got-want) <= 1e-6*math.Max(1, math.Abs(want)) }

func TestResources(t *testing.T) {
	// One hour, a sample every 5 s (i = 0..720), settled at 6 min (i =
	// 72); goroutines grow by one a sample, 720 an hour; descriptors dip
	// and peak once.
	r := flatRun(time.Hour, func(i int, s *wire.Sample) {
		s.Goroutines += i
		switch i {
		case 100:
			s.FDs = 10
		case 101:
			s.FDs = 500
		case 10: // before the run settled: not the minimum
			s.FDs = 1
		}
	})
	// Samples may come in any order.
	samples := r.Sides[wire.RoleAuthvault].Samples
	samples[0], samples[len(samples)-1] = samples[len(samples)-1], samples[0]
	ss := Summarize(r).Side(wire.RoleAuthvault)

	g := ss.Resources[Goroutines]
	// The baseline: the median of the window before the faults (i =
	// 68..72); the end: the least of the window before the end (i =
	// 716..720). The second half: i = 360..720, whose mean is 400+540.
	if g.Baseline != 470 || g.Min != 472 || g.Max != 1120 || g.Final != 1116 || g.HalfSamples != 361 ||
		!near(g.Slope, 720) || !near(g.SlopePercent, 720.0/940*100) {
		t.Errorf("goroutines: got %+v, want baseline 470, min 472, max 1120, final 1116, 361 samples, slope 720/h, %.4f %%/h", g, 720.0/940*100)
	}
	f := ss.Resources[FDs]
	if f.Baseline != 60 || f.Min != 10 || f.Max != 500 || f.Final != 60 || !near(f.Slope, 0) || !near(f.SlopePercent, 0) {
		t.Errorf("descriptors: got %+v, want baseline 60, min 10, max 500, final 60, flat", f)
	}
	if h := ss.Resources[HeapInUse]; h.Baseline != 64<<20 || !near(h.SlopePercent, 0) {
		t.Errorf("heap: got %+v, want a flat 64 MiB", h)
	}

	// Log lines: 3 a sample from i = 72 to 720, over 54 minutes, for 50
	// clusters and the hub.
	if want := 3 * 648 / 0.9 / 51; !near(ss.LogLinesPerClusterHour, want) {
		t.Errorf("log lines per hour per cluster: got %v, want %v", ss.LogLinesPerClusterHour, want)
	}
	// authvault counts its logins (one a sample, 720 in the hour);
	// client-go's are its plugin's runs (40).
	if !near(ss.LoginsPerHour, 720) || !near(ss.PredictedPerHour, 20) || !near(ss.LoginRatio, 36) {
		t.Errorf("authvault logins: got %v/h against %v/h (%v), want 720 against 20 (36)", ss.LoginsPerHour, ss.PredictedPerHour, ss.LoginRatio)
	}
	cg := Summarize(r).Side(wire.RoleClientGo)
	if !near(cg.LoginsPerHour, 40) || !near(cg.LoginRatio, 2) {
		t.Errorf("client-go logins: got %v/h (%v of predicted), want 40 (2)", cg.LoginsPerHour, cg.LoginRatio)
	}
	if !near(ss.RequestsPerSecond, 20) {
		t.Errorf("requests per second: got %v, want 20", ss.RequestsPerSecond)
	}
}

func TestSlopeOfZero(t *testing.T) {
	// A count that is always 0 has no mean to divide its slope by.
	r := flatRun(time.Hour, func(i int, s *wire.Sample) { s.Conns = 0 })
	if c := Summarize(r).Side(wire.RoleAuthvault).Resources[Conns]; c.Slope != 0 || c.SlopePercent != 0 {
		t.Errorf("connections always 0: got %+v, want a slope of 0", c)
	}
	if errs := Summarize(r).Check(Bounds{Slope: true}); errs != nil {
		t.Errorf("connections always 0: Check = %v, want nil", errs)
	}
}

// A side started again counts its logins from zero: the report adds the
// processes up.
func TestLoginsOfARestartedSide(t *testing.T) {
	var samples []wire.Sample
	for i, n := range []int64{0, 4, 9, 2, 5} {
		samples = append(samples, wire.Sample{At: t0.Add(time.Duration(i) * time.Second), Logins: n})
	}
	if got := loginsOf(samples); got != 14 {
		t.Errorf("loginsOf = %d, want 9 + 5", got)
	}
}

// A component of a side started again (the shard peer) that serves in its
// new process is not silent, though its count fell below the old one's;
// one that does not serve there is.
func TestSilentAcrossARestart(t *testing.T) {
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	sample := func(i int, fleet int64) wire.Sample {
		return wire.Sample{At: at(i), Successes: map[string]int64{"fleet": fleet}}
	}
	served := []wire.Sample{sample(0, 0), sample(10, 50), sample(20, 90), sample(30, 3), sample(40, 20)}
	if got := Silent(served, at(10), 10*time.Second, at(25), at(40)); len(got) != 0 {
		t.Errorf("served after the restart: silent %v", got)
	}
	dead := []wire.Sample{sample(0, 0), sample(10, 50), sample(20, 90), sample(30, 0), sample(40, 0)}
	if got := Silent(dead, at(10), 10*time.Second, at(25), at(40)); !slices.Equal(got, []string{"fleet"}) {
		t.Errorf("nothing served after the restart: silent %v, want fleet", got)
	}
}
