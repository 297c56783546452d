package report

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// errorText is errs, a line each.
func errorText(errs []error) string { return errors.Join(errs...).Error() }

func TestCheck(t *testing.T) {
	hour := time.Hour
	leak := func(i int, s *wire.Sample) { s.Goroutines += 2 * i } // +2 per sample: 1440/h on 400
	tests := []struct {
		name   string
		run    *Run
		bounds Bounds
		// want are the substrings of the errors, one error each; none:
		// the run passes.
		want [][]string
	}{
		{name: "flat run, every check", run: flatRun(hour, nil), bounds: Bounds{Slope: true, Sides: []string{wire.RoleAuthvault, wire.RoleClientGo}}},
		{
			name:   "goroutine leak, slope on",
			run:    flatRun(hour, leak),
			bounds: Bounds{Slope: true, Tolerance: Tolerance{Fraction: 100}}, // the final sample passes
			want:   [][]string{{"authvault side", "goroutines grew", "%/h", "bound 25 %/h"}},
		},
		{
			name:   "goroutine leak, slope off",
			run:    flatRun(hour, leak),
			bounds: Bounds{Tolerance: Tolerance{Fraction: 100}},
		},
		{
			name:   "goroutine leak on the client-go side, which is not gated",
			run:    leakOn(wire.RoleClientGo, flatRun(hour, nil)),
			bounds: Bounds{Slope: true},
		},
		{
			name:   "goroutine leak on the client-go side, gated",
			run:    leakOn(wire.RoleClientGo, flatRun(hour, nil)),
			bounds: Bounds{Slope: true, Sides: []string{wire.RoleClientGo}},
			want:   [][]string{{"client-go side", "not back", "goroutines 1832, above 594 (baseline 540"}, {"client-go side", "goroutines grew 97.30 %/h", "(+1440 an hour)"}},
		},
		{
			name: "descriptors stay up at the end",
			run: flatRun(2*time.Minute, func(i int, s *wire.Sample) {
				if s.At.After(t0.Add(time.Minute)) {
					s.FDs += 30
				}
			}),
			want: [][]string{{"authvault side", "not back to the baseline at the end", "file descriptors 90, above 66 (baseline 60"}},
		},
		{
			// As in the 60-min soak: every 6.5 min an API server restart
			// takes goroutines and connections down to a third for half a
			// minute, then the requests that waited on it push them up by
			// half for another; nothing leaks. Through every sample the
			// line depends on where the run ends in that cycle.
			name: "fault swings, nothing leaking",
			run: flatRun(hour, func(i int, s *wire.Sample) {
				switch phase := (i * 5) % 390; {
				case phase < 30:
					s.Goroutines, s.Conns, s.FDs = s.Goroutines/3, s.Conns/3, s.FDs/3
				case phase < 60:
					s.Goroutines, s.Conns, s.FDs = s.Goroutines*3/2, s.Conns*3/2, s.FDs*3/2
				}
			}),
			bounds: Bounds{Slope: true},
		},
		{
			name: "clusters that stopped serving during the faults and never came back",
			run: flatRun(2*time.Minute, func(i int, s *wire.Sample) {
				if s.At.After(t0.Add(time.Minute)) {
					s.Clusters -= 15
				}
			}),
			want: [][]string{{"authvault side", "reaches 35 of the fleet's 50 clusters at the end"}},
		},
		{
			name: "descriptors up during the faults, back at the end",
			run: flatRun(2*time.Minute, func(i int, s *wire.Sample) {
				if s.At.After(t0.Add(time.Minute)) && s.At.Before(t0.Add(100*time.Second)) {
					s.FDs += 30
				}
			}),
		},
		{
			name: "heap grows 5 %/h: within its default bound",
			run: flatRun(hour, func(i int, s *wire.Sample) {
				s.HeapInUse += uint64(float64(64<<20) * 0.05 * s.At.Sub(t0).Hours())
			}),
			bounds: Bounds{Slope: true},
		},
		{
			name: "heap grows 40 %/h",
			run: flatRun(hour, func(i int, s *wire.Sample) {
				s.HeapInUse += uint64(float64(64<<20) * 0.40 * s.At.Sub(t0).Hours())
			}),
			bounds: Bounds{Slope: true},
			want:   [][]string{{"authvault side", "heap in use grew", "bound 25 %/h"}},
		},
		{
			name:   "connections grow, a bound of their own",
			run:    flatRun(hour, func(i int, s *wire.Sample) { s.Conns += i / 100 }),
			bounds: Bounds{Slope: true, ConnsSlope: 50, Tolerance: Tolerance{Slack: 100}},
		},
		{
			name: "a leaked secret",
			run: func() *Run {
				r := flatRun(2*time.Minute, nil)
				r.Sides[wire.RoleAuthvault].Leaked = []string{"log file line 12"}
				return r
			}(),
			want: [][]string{{"authvault side", "a secret leaked: log file line 12"}},
		},
		{
			name: "an unexplained failure",
			run: func() *Run {
				r := flatRun(2*time.Minute, nil)
				r.Sides[wire.RoleAuthvault].Failures = []wire.Failure{{At: t0.Add(30 * time.Second), Component: "fleet", Cluster: "c7", Kind: "refused", Message: "connection refused"}}
				return r
			}(),
			want: [][]string{{"authvault side", "1 unexplained failures", "30s after the start", "fleet c7 refused: connection refused"}},
		},
		{
			name: "no sample after the run settled",
			run: func() *Run {
				r := flatRun(2*time.Minute, nil)
				r.Settled = r.End.Add(time.Second)
				return r
			}(),
			want: [][]string{{"authvault side", "no baseline"}},
		},
		{
			name:   "too short for a slope",
			run:    flatRun(8*time.Second, nil),
			bounds: Bounds{Slope: true},
			want: [][]string{
				{"heap in use: no slope: fewer than 2 samples (1)"}, {"goroutines: no slope"},
				{"file descriptors: no slope"}, {"connections: no slope"},
			},
		},
		{
			// A fault's grace explains what callers meet after it: a run
			// that ends inside it checks nothing of what came after the
			// faults, and a hub credential that never recovered passed.
			name: "failing for good after the faults, the run ending inside the last grace",
			run: func() *Run {
				r := flatRun(2*time.Minute, nil)
				r.Faults = []Fault{{Kind: "ca-rotation", Scope: "all", Start: r.FaultsEnd.Add(-10 * time.Second), End: r.FaultsEnd, Grace: 30 * time.Second}}
				for at := r.FaultsEnd; !at.After(r.End); at = at.Add(time.Second) {
					r.Sides[wire.RoleAuthvault].Failures = append(r.Sides[wire.RoleAuthvault].Failures, wire.Failure{At: at, Component: "hub", Kind: "unauthorized"})
				}
				return r
			}(),
			want: [][]string{{"the run ended 0s after the faults' graces", "less than the 20s", "unchecked"}},
		},
		{
			// A component that neither fails nor succeeds (a lost lease
			// never taken again, a caller stuck) shows no failure at all.
			name: "components that stopped succeeding, none failing",
			run: func() *Run {
				r := flatRun(2*time.Minute, serving(t0.Add(80*time.Second), "addon", "operator"))
				r.Faults = []Fault{{Kind: "revocation", Scope: "hub", Start: t0.Add(70 * time.Second), End: r.FaultsEnd, Grace: 5 * time.Second}}
				return r
			}(),
			want: [][]string{{"authvault side", "addon, operator: no success in the 25s since the faults' graces ended", "before the faults"}},
		},
		{
			name: "every component serving after the faults; the watch, one success a watch, needs none",
			run: func() *Run {
				r := flatRun(2*time.Minute, serving(t0.Add(80*time.Second), "watch"))
				r.Faults = []Fault{{Kind: "revocation", Scope: "hub", Start: t0.Add(70 * time.Second), End: r.FaultsEnd, Grace: 5 * time.Second}}
				return r
			}(),
		},
		{
			name:   "a side that is not in the run",
			run:    flatRun(2*time.Minute, nil),
			bounds: Bounds{Sides: []string{"kopf"}},
			want:   [][]string{{"kopf side: not in the run"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := Summarize(tt.run).Check(tt.bounds)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tt.want), errs)
			}
			for i, err := range errs {
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error %d is not one line: %q", i, err)
				}
				if !strings.HasPrefix(err.Error(), "report: ") {
					t.Errorf("error %d does not start with the package: %q", i, err)
				}
				for _, w := range tt.want[i] {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %d = %q, want it to contain %q", i, err, w)
					}
				}
			}
		})
	}
}

// serving makes every component succeed once a sample, and those of
// stopped no more from stop on ("operator": its reconciles).
func serving(stop time.Time, stopped ...string) func(int, *wire.Sample) {
	return func(i int, s *wire.Sample) {
		s.Successes = map[string]int64{}
		for _, c := range []string{"hub", "watch", "exec", "addon", "fleet", "operator"} {
			n := int64(i)
			if slices.Contains(stopped, c) && s.At.After(stop) {
				n = int64(stop.Sub(t0) / every)
			}
			if c == "operator" {
				s.Reconciled = n
			} else {
				s.Successes[c] = n
			}
		}
	}
}

// leakOn makes the goroutines of r's side of role grow by 2 a sample.
func leakOn(role string, r *Run) *Run {
	for i := range r.Sides[role].Samples {
		r.Sides[role].Samples[i].Goroutines += 2 * i
	}
	return r
}

func TestBack(t *testing.T) {
	base := wire.Sample{Goroutines: 400, FDs: 60, Conns: 20, HeapInUse: 1 << 20}
	with := func(g, f, c int) wire.Sample {
		s := base
		s.Goroutines, s.FDs, s.Conns = g, f, c
		return s
	}
	tests := []struct {
		name string
		now  wire.Sample
		tol  Tolerance
		want []string // substrings of the error; nil: back
	}{
		{name: "the baseline itself", now: base},
		{name: "below the baseline", now: with(10, 5, 0)},
		{name: "goroutines at 10 %", now: with(440, 60, 20)},
		{name: "goroutines past 10 %", now: with(441, 60, 20), want: []string{"goroutines 441, above 440 (baseline 400 + max(10 %, 5))"}},
		{name: "connections at the slack", now: with(400, 60, 25)},
		{name: "connections past the slack", now: with(400, 60, 26), want: []string{"connections 26, above 25"}},
		{name: "descriptors at 10 %", now: with(400, 66, 20)},
		{name: "descriptors past 10 %", now: with(400, 67, 20), want: []string{"file descriptors 67, above 66"}},
		{name: "every one past", now: with(500, 100, 50), want: []string{"goroutines 500", "; file descriptors 100", "; connections 50"}},
		{name: "the heap is not a count that must come back", now: func() wire.Sample { s := base; s.HeapInUse *= 10; return s }()},
		{name: "a tolerance of its own", now: with(600, 60, 20), tol: Tolerance{Fraction: 0.5}},
		{name: "a slack of its own", now: with(400, 60, 60), tol: Tolerance{Slack: 40}},
		{name: "a slack of its own, past", now: with(400, 60, 61), tol: Tolerance{Slack: 40}, want: []string{"connections 61, above 60 (baseline 20 + max(10 %, 40))"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Back(base, tt.now, tt.tol)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Back = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Back = nil, want an error containing %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), "report: not back to the baseline: ") {
				t.Errorf("Back = %q, want it to start with the package and what", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Back = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckErrorText(t *testing.T) {
	// The whole of Check's output, once, as a reader gets it.
	r := leakOn(wire.RoleAuthvault, flatRun(time.Hour, nil))
	got := errorText(Summarize(r).Check(Bounds{Slope: true}))
	want := "report: authvault side: not back to the baseline at the end: goroutines 1832, above 594 (baseline 540 + max(10 %, 5))\n" +
		"report: authvault side: goroutines grew"
	if !strings.HasPrefix(got, want) {
		t.Errorf("Check:\n%s\nwant it to start with\n%s", got, want)
	}
}

// sharedRun is flatRun with the authvault side's fleet shared with a shard
// peer: each reaches a part of the 50 clusters.
func sharedRun(authvault, peer int) *Run {
	r := flatRun(time.Hour, nil)
	r.Shared = []string{wire.RoleAuthvault, wire.RoleShardPeer}
	p := &Side{Role: wire.RoleShardPeer, PredictedLogins: 20}
	for _, s := range r.Sides[wire.RoleAuthvault].Samples {
		s.Clusters = peer
		p.Samples = append(p.Samples, s)
	}
	for i := range r.Sides[wire.RoleAuthvault].Samples {
		r.Sides[wire.RoleAuthvault].Samples[i].Clusters = authvault
	}
	r.Sides[wire.RoleShardPeer] = p
	return r
}

// Replicas that share the fleet reach every cluster together: neither is
// short of it alone, and together one short is.
func TestCheckSharedFleet(t *testing.T) {
	bounds := Bounds{Sides: []string{wire.RoleAuthvault, wire.RoleShardPeer}}
	if errs := Summarize(sharedRun(27, 23)).Check(bounds); len(errs) != 0 {
		t.Errorf("27 + 23 of 50: %v", errs)
	}
	errs := Summarize(sharedRun(27, 22)).Check(bounds)
	if len(errs) != 2 || !strings.Contains(errors.Join(errs...).Error(), "reaches 49 of the fleet's 50 clusters at the end with the replicas it shares them with") {
		t.Errorf("27 + 22 of 50: %v, want both sides short, together", errs)
	}
	// Without Shared, the side alone must reach them all.
	r := sharedRun(27, 23)
	r.Shared = nil
	if errs := Summarize(r).Check(bounds); len(errs) != 2 {
		t.Errorf("not shared: %v, want both sides short", errs)
	}
}
