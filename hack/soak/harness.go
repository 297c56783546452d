package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/authvault/authvault/hack/soak/hub"
	"github.com/authvault/authvault/hack/soak/report"
	"github.com/authvault/authvault/hack/soak/wire"
)

// options are the harness's flags.
type options struct {
	duration        time.Duration
	dir             string
	reportPath      string
	chart           string
	secretClusters  int
	profileClusters int
	minLife         time.Duration
	maxLife         time.Duration
	latency         time.Duration
	workers         int
	sampleEvery     time.Duration
	hold            time.Duration
	gap             time.Duration
	quiet           time.Duration
	settleMax       time.Duration
	slope           bool
	faults          string
	warmup          time.Duration
}

// long is a run long enough for the slope of its second half to mean
// something: below it, only the baseline check runs.
const long = 20 * time.Minute

func (o *options) register(fs *flag.FlagSet) {
	def := 60 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("SOAK_DURATION")); err == nil {
		def = d
	}
	fs.DurationVar(&o.duration, "duration", def, "how long the faults come (default: $SOAK_DURATION, else 60m); the run then stays quiet until the authvault side is back at its baseline")
	fs.StringVar(&o.dir, "dir", "", "where the run's files go: the sides' records and logs, the report, the chart (default: a new temporary directory, kept)")
	fs.StringVar(&o.reportPath, "report", "", "where the report (markdown) goes (default: soak.md in --dir)")
	fs.StringVar(&o.chart, "chart", "", "where the chart goes, .svg or .png, several comma-separated (default: soak.svg in --dir)")
	fs.IntVar(&o.secretClusters, "secret-clusters", 35, "fleet clusters from kubeconfig Secrets")
	fs.IntVar(&o.profileClusters, "profile-clusters", 15, "fleet clusters from ClusterProfiles")
	fs.DurationVar(&o.minLife, "token-life-min", 20*time.Second, "the shortest a token lives")
	fs.DurationVar(&o.maxLife, "token-life-max", 60*time.Second, "the longest a token lives")
	fs.DurationVar(&o.latency, "plugin-latency", time.Second, "how long each run of the exec plugin takes")
	fs.IntVar(&o.workers, "workers", 2, "workers per side creating, updating, listing and deleting ConfigMaps")
	fs.DurationVar(&o.sampleEvery, "sample-every", 0, "how often each side samples itself (default: 5s, 2s for a run shorter than 10m)")
	fs.DurationVar(&o.hold, "hold", 0, "how long a plugin fault lasts (default: 30s, 8s for a run shorter than 10m)")
	fs.DurationVar(&o.gap, "gap", 0, "the quiet time between two faults (default: 20s, 5s for a run shorter than 10m)")
	fs.DurationVar(&o.quiet, "quiet", 0, "the least quiet time after the faults (default: 2m, 15s for a run shorter than 10m)")
	fs.StringVar(&o.faults, "faults", "", "the faults to cause, comma-separated, in this order (default: every kind: "+strings.Join(faultKinds(), ",")+")")
	fs.BoolVar(&o.slope, "check-slope", false, "check the slope of the second half even in a run shorter than 20m (a leak grows fast enough to show in a few minutes)")
	fs.DurationVar(&o.warmup, "warmup", 40*time.Second, "how long the sides run before the faults, once they reach every cluster: its second half is the baseline, and the end is read over as long")
	fs.DurationVar(&o.settleMax, "settle-max", 4*time.Minute, "the longest the authvault side may take to come back to its baseline after the faults: a bound on a hang, not a speed")
}

// defaults fills what depends on the run's length.
func (o *options) defaults() {
	short := o.duration < 10*time.Minute
	pick := func(v *time.Duration, long, short_ time.Duration) {
		if *v == 0 {
			*v = long
			if short {
				*v = short_
			}
		}
	}
	pick(&o.sampleEvery, 5*time.Second, 2*time.Second)
	pick(&o.hold, 30*time.Second, 8*time.Second)
	pick(&o.gap, 20*time.Second, 5*time.Second)
	pick(&o.quiet, 2*time.Minute, 15*time.Second)
}

func logf(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// harness runs the soak and reports; its error says what failed.
func harness(ctx context.Context, o *options) error {
	o.defaults()
	if o.dir == "" {
		dir, err := os.MkdirTemp("", "authvault-soak-")
		if err != nil {
			return err
		}
		o.dir = dir
	} else if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	// A run's files, not those of the one before in the same directory
	// (the sides append to their logs, which the leak scan reads whole).
	for _, role := range hub.Sides {
		for _, ext := range []string{".out", ".err", ".log"} {
			_ = os.Remove(filepath.Join(o.dir, role+ext))
		}
	}
	if o.reportPath == "" {
		o.reportPath = filepath.Join(o.dir, "soak.md")
	}
	if o.chart == "" {
		o.chart = filepath.Join(o.dir, "soak.svg")
	}
	binary, err := os.Executable()
	if err != nil {
		return err
	}
	logf("soak: faults for %v, files in %s; starting kube-apiserver and etcd, %d clusters (%d from Secrets, %d from ClusterProfiles)",
		o.duration, o.dir, o.secretClusters+o.profileClusters, o.secretClusters, o.profileClusters)
	h, err := hub.Start(ctx, hub.Options{Dir: o.dir, Binary: binary, SecretClusters: o.secretClusters, ProfileClusters: o.profileClusters,
		MinTokenLife: o.minLife, MaxTokenLife: o.maxLife, PluginLatency: o.latency, Workers: o.workers, SampleEvery: o.sampleEvery, Logf: logf})
	if err != nil {
		return err
	}
	defer h.Stop()

	run := &report.Run{Start: time.Now(), Sides: map[string]*report.Side{}, Clusters: h.Clusters(), Shared: shared}
	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	h.Probe(probeCtx)
	sides := map[string]*sideProc{}
	defer func() {
		for _, s := range sides {
			if !s.exited() {
				_ = s.stop(30 * time.Second)
			}
		}
	}()
	for _, role := range hub.Sides {
		s, err := startSide(binary, o.dir, h.Config(role))
		if err != nil {
			return err
		}
		sides[role] = s
	}
	if err := settle(ctx, sides, h.Clusters()); err != nil {
		return err
	}
	// The baseline is read over the window before the faults, once every
	// cluster has been read a few times over.
	logf("both sides reach all %d clusters; the baseline is their next %v", h.Clusters(), o.warmup)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.warmup):
	}
	run.Settled, run.Window = time.Now(), o.warmup/2
	logf("faults begin")

	restart := func(ctx context.Context) ([]report.Fault, error) {
		return restartPeer(ctx, sides, binary, o.dir, h.Config(wire.RoleShardPeer), o.hold)
	}
	steps, err := pick(schedule(h, o.hold, restart), o.faults)
	if err != nil {
		return err
	}
	var faultErr error
	run.Faults, faultErr = runFaults(ctx, steps, o.duration, o.gap, logf)
	run.FaultsEnd = time.Now()
	if faultErr != nil {
		return faultErr
	}
	logf("faults over; quiet for at least %v, until the authvault side and its shard peer are back at their baselines (at most %v)", o.quiet, o.settleMax)
	// Until the last grace ends (a stall the probe sees now moves it on),
	// the faults explain what callers meet.
	clear := func() time.Time { return report.Clear(append(slices.Clone(run.Faults), h.Stalls()...)) }
	var backErrs []error
	for i, role := range shared {
		// The quiet time once, for both: the peer's wait starts when the
		// authvault side's has ended.
		quiet := o.quiet
		if i > 0 {
			quiet = 0
		}
		backErrs = append(backErrs, comeBack(ctx, sides, role, h.Clusters(), run.Settled, run.Window, quiet, o.settleMax, clear))
	}
	backErr := errors.Join(backErrs...)
	run.End = time.Now()
	stopProbe()
	if stalls := h.Stalls(); len(stalls) > 0 {
		run.Faults = append(run.Faults, stalls...)
		logf("the API server stalled %d times (answers slower than %v to the harness's own probe): each explains what callers met during it", len(stalls), hub.SlowProbe)
	}

	var stopErrs []error
	for _, role := range hub.Sides {
		s := sides[role]
		stopErrs = append(stopErrs, s.stop(30*time.Second))
		side := &report.Side{Role: role, Samples: s.samples, Failures: s.failures, PluginRuns: h.PluginRuns(role)}
		side.PredictedLogins = predictedLogins(o, role, run.End.Sub(run.Settled))
		for _, path := range []string{s.out, s.err, h.Config(role).LogFile} {
			text, err := os.ReadFile(path)
			if err != nil {
				stopErrs = append(stopErrs, err)
				continue
			}
			side.Leaked = append(side.Leaked, h.Leaks(filepath.Base(path), text)...)
		}
		if s.bad > 0 {
			stopErrs = append(stopErrs, fmt.Errorf("soak: the %s side wrote %d lines that were no record (see %s)", role, s.bad, s.out))
		}
		run.Sides[role] = side
	}

	// The run as recorded, to read again or draw otherwise later.
	if raw, err := json.Marshal(run); err == nil {
		_ = os.WriteFile(filepath.Join(o.dir, "run.json"), raw, 0o644)
	}
	summary := report.Summarize(run)
	md := summary.Markdown()
	if err := os.WriteFile(o.reportPath, []byte(md), 0o644); err != nil {
		return err
	}
	for path := range strings.SplitSeq(o.chart, ",") {
		if err := report.WriteChart(path, run); err != nil {
			return err
		}
	}
	fmt.Printf("\n%s\nreport: %s\nchart: %s\n", md, o.reportPath, o.chart)

	errs := append(stopErrs, backErr)
	errs = append(errs, summary.Check(report.Bounds{Sides: []string{wire.RoleAuthvault, wire.RoleShardPeer}, Slope: o.slope || o.duration >= long})...)
	return errors.Join(errs...)
}

// predictedLogins is what the tokens' lives call for over d: a login per
// mean token life for each source of credentials the side logs in with
// (authvault and its shard peer: the plugin and the token file on the hub,
// and their share of the fleet's clusters; client-go: its plugin on the hub and on each ClusterProfile
// cluster, a Secret's cluster being rebuilt rather than logged in).
func predictedLogins(o *options, role string, d time.Duration) float64 {
	sources := float64(1 + o.profileClusters)
	if slices.Contains(shared, role) {
		// Its hub's two, and its share of the fleet's clusters.
		sources = 2 + float64(o.secretClusters+o.profileClusters)/float64(len(shared))
	}
	mean := (o.minLife + o.maxLife) / 2
	return sources * d.Seconds() / mean.Seconds()
}

// settle waits for both sides to reach every cluster and serve requests:
// from then on samples count. Five minutes bound a hang: 50 clusters join
// within a minute on two busy cores.
func settle(ctx context.Context, sides map[string]*sideProc, clusters int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ready := 0
		var behind []string
		for role, s := range sides {
			if s.exited() {
				return fmt.Errorf("soak: the %s side ended before it settled (its stderr: %s)", role, s.err)
			}
			last, ok := s.last()
			if reached := reachedBy(sides, role); ok && reached >= clusters && last.Requests > 0 {
				ready++
			} else {
				behind = append(behind, fmt.Sprintf("%s: %d of %d clusters, %d requests", role, reached, clusters, last.Requests))
			}
		}
		if ready == len(sides) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: the sides did not settle within 5 min: %s", strings.Join(behind, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// comeBack waits at least quiet, then until the side is back at its
// baseline (report.BaselineOf the window before the faults; the side's
// report.FloorOf the last window), reaches every one of the fleet's
// clusters again, and, a window past the faults' graces (clear), has had
// a success of every component that had one before the faults, for at
// most max.
func comeBack(ctx context.Context, sides map[string]*sideProc, role string, clusters int, settled time.Time, window, quiet, max time.Duration, clear func() time.Time) error {
	s := sides[role]
	start := time.Now()
	s.mu.Lock()
	baseline, ok := report.BaselineOf(s.samples, settled.Add(-window), settled)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("soak: the %s side sent no sample in the %v before the faults: no baseline", s.role, window)
	}
	for {
		now := time.Now()
		s.mu.Lock()
		floor, ok := report.FloorOf(s.samples, now.Add(-window), now)
		s.mu.Unlock()
		err := fmt.Errorf("soak: the %s side sent no sample in the last %v", s.role, window)
		if ok {
			err = report.Back(baseline, floor, report.Tolerance{})
		}
		if reached := reachedBy(sides, role); err == nil && reached < clusters {
			err = fmt.Errorf("soak: the %s side reaches %d of the fleet's %d clusters", s.role, reached, clusters)
		}
		if c := clear(); err == nil && now.Before(c.Add(window)) {
			err = fmt.Errorf("soak: the faults' graces end at %s, and the %v after them is yet to come", c.Format("15:04:05"), window)
		}
		if err == nil {
			s.mu.Lock()
			silent := report.Silent(s.samples, settled, window, clear(), now)
			s.mu.Unlock()
			if len(silent) > 0 {
				err = fmt.Errorf("soak: the %s side has had no success of %s since the faults' graces ended", s.role, strings.Join(silent, ", "))
			}
		}
		if time.Since(start) >= quiet && err == nil {
			return nil
		}
		if time.Since(start) >= max {
			return fmt.Errorf("soak: %v after the faults: %w", max, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// shared are the roles whose fleets share the clusters on Leases
// (hub.Config sets their ShardGroup).
var shared = []string{wire.RoleAuthvault, wire.RoleShardPeer}

// reachedBy is how many clusters role's side reaches now: with the other
// replicas of its fleet when it shares them.
func reachedBy(sides map[string]*sideProc, role string) int {
	roles := []string{role}
	if slices.Contains(shared, role) {
		roles = shared
	}
	n := 0
	for _, r := range roles {
		if s := sides[r]; s != nil {
			last, _ := s.last()
			n += last.Clusters
		}
	}
	return n
}

// restartPeer is the fault of a replica that dies: the shard peer killed
// (kill -9: no Lease released, no cluster let go), started again after
// hold, as a Deployment's pod is. Until its Lease expires, its clusters
// have no owner; then the authvault side takes them, and gives them back
// when the peer is back. Callers of the fleet may meet that (a read on a
// cluster whose vault closes under it): the fault's grace covers the
// handover back, a Lease's life and a few renewals after the start.
func restartPeer(ctx context.Context, sides map[string]*sideProc, binary, dir string, cfg wire.Config, hold time.Duration) ([]report.Fault, error) {
	old := sides[wire.RoleShardPeer]
	start := time.Now()
	old.kill()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(hold):
	}
	s, err := startSide(binary, dir, cfg)
	if err != nil {
		return nil, err
	}
	s.carry(old)
	sides[wire.RoleShardPeer] = s
	return []report.Fault{{Kind: "replica-restart", Start: start, End: time.Now(), Scope: "fleet", Grace: 20 * time.Second}}, nil
}
