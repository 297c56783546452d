package side

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/hack/soak/wire"
)

// Defaults of a Config's zero fields.
const (
	defaultWorkers     = 2
	defaultSampleEvery = 5 * time.Second
)

// Run runs the side's components and workload until ctx ends, writing a
// wire.Record per line to out (a Sample every cfg.SampleEvery, and a
// Failure for each operation a caller saw fail); logs go to cfg.LogFile.
// It returns once everything it started has stopped, with an error only
// when the side could not be set up (a Config it cannot use, a vault that
// never logged in before ctx ended).
func Run(ctx context.Context, cfg wire.Config, out io.Writer) error {
	if cfg.Workers <= 0 {
		cfg.Workers = defaultWorkers
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = defaultSampleEvery
	}
	log, closeLogs, err := openLogs(cfg.LogFile)
	if err != nil {
		return err
	}
	defer closeLogs()
	log = log.WithValues("side", cfg.Side)

	var p *plumbing
	switch cfg.Side {
	case wire.RoleAuthvault, wire.RoleShardPeer:
		p, err = authvaultSide(ctx, cfg, log)
	case wire.RoleClientGo:
		p, err = clientGoSide(ctx, cfg, log)
	default:
		err = fmt.Errorf("soak: no side %q", cfg.Side)
	}
	if err != nil {
		return err
	}
	defer p.close()
	cs, err := kubernetes.NewForConfig(withRate(p.hub))
	if err != nil {
		return fmt.Errorf("soak: a client for the hub: %w", err)
	}

	rec := newRecorder(ctx, out)
	w := &workload{rec: rec, cs: cs, ns: cfg.Namespace}
	fl := newFleetLoad(rec, p.fleet)
	op := &operator{rec: rec, log: log.WithName("operator"), cfg: p.hub, ns: cfg.Namespace}
	ad := &addon{rec: rec, cs: cs, ns: cfg.Namespace, audiences: p.audiences, authorize: p.authorize}
	s := &sampler{rec: rec, clusters: fl.reachable, reconciled: op.reconciled.Load, owned: p.owned}
	if p.countLogins {
		s.logins = &counterSum{}
	}

	var wg sync.WaitGroup
	wg.Go(func() { p.run(ctx) })
	wg.Go(func() { fl.run(ctx) })
	if !cfg.FleetOnly {
		for i := range cfg.Workers {
			wg.Go(func() { w.crud(ctx, i) })
		}
		wg.Go(func() { w.watch(ctx) })
		wg.Go(func() { w.execLoop(ctx, p.hub, cfg.Pod) })
		wg.Go(func() { op.run(ctx) })
		wg.Go(func() {
			if err := ad.run(ctx, p.front); err != nil {
				rec.fail(compAddon, "", "", err)
			}
		})
	}

	t := time.NewTicker(cfg.SampleEvery)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-t.C:
			sample := s.take()
			rec.write(wire.Record{Sample: &sample})
		case <-ctx.Done():
			done = true
		}
	}
	wg.Wait()
	return nil
}

// withRate is cfg with a client-side rate limit above the workload's
// rate: client-go's default of 5 requests a second would hold it back.
func withRate(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}
