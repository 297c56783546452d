package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/authvault/authvault/hack/soak/hub"
	"github.com/authvault/authvault/hack/soak/report"
)

// step is one fault of the schedule.
type step struct {
	kind string
	do   func(ctx context.Context) ([]report.Fault, error)
}

// schedule is the faults in the order they come, over and over: the
// cheap ones first, so that a short run meets most kinds.
func schedule(h *hub.Hub, hold time.Duration, restartPeer func(context.Context) ([]report.Fault, error)) []step {
	down := 3 * time.Second
	return []step{
		{"revocation", func(ctx context.Context) ([]report.Fault, error) { return h.Revoke(ctx, 3) }},
		{"plugin-failing", func(ctx context.Context) ([]report.Fault, error) { return h.PluginFault(ctx, hub.Failing, hold), nil }},
		{"replica-restart", restartPeer},
		{"secret-recreate", func(ctx context.Context) ([]report.Fault, error) { return h.RecreateSecrets(ctx, 3, hold/2) }},
		{"apiserver-restart", func(context.Context) ([]report.Fault, error) { return h.RestartAPIServer(down) }},
		{"plugin-hanging", func(ctx context.Context) ([]report.Fault, error) { return h.PluginFault(ctx, hub.Hanging, hold), nil }},
		{"ca-rotation", func(ctx context.Context) ([]report.Fault, error) { return h.RotateCA(ctx, down) }},
		{"partition", func(ctx context.Context) ([]report.Fault, error) { return h.PluginFault(ctx, hub.Partition, hold), nil }},
		{"issuer-change", func(ctx context.Context) ([]report.Fault, error) { return h.ChangeIssuer(ctx, down) }},
	}
}

// faultKinds are the kinds of fault the schedule has, in its order.
func faultKinds() []string {
	var kinds []string
	for _, s := range schedule(nil, 0, nil) {
		kinds = append(kinds, s.kind)
	}
	return kinds
}

// pick is the steps the --faults flag names, in its order; all of them
// when it is empty.
func pick(steps []step, names string) ([]step, error) {
	if names == "" {
		return steps, nil
	}
	var picked []step
	for name := range strings.SplitSeq(names, ",") {
		i := slices.IndexFunc(steps, func(s step) bool { return s.kind == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("soak: --faults: no fault %q (%s)", name, strings.Join(faultKinds(), ", "))
		}
		picked = append(picked, steps[i])
	}
	return picked, nil
}

// runFaults causes the schedule's faults, gap apart, until d has passed
// (the fault under way is let finish), and returns them.
func runFaults(ctx context.Context, steps []step, d, gap time.Duration, logf func(string, ...any)) ([]report.Fault, error) {
	start := time.Now()
	var all []report.Fault
	for i := 0; time.Since(start) < d && ctx.Err() == nil; i++ {
		s := steps[i%len(steps)]
		began := time.Now()
		faults, err := s.do(ctx)
		all = append(all, faults...)
		if err != nil {
			return all, fmt.Errorf("soak: fault %s: %w", s.kind, err)
		}
		logf("fault %-17s %6.1fs (round %d)", s.kind, time.Since(began).Seconds(), i/len(steps)+1)
		select {
		case <-ctx.Done():
		case <-time.After(gap):
		}
	}
	return all, ctx.Err()
}
