package fleet_test

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/authvault/authvault/fleet"
)

// A fleet of the members Flux's ConfigMaps describe, under a manager on
// the hub: each ConfigMap of the namespace fleet-members with a provider
// key is a member, reached with tokens the hub mints for the
// ServiceAccount it names. (It needs a hub: here it only compiles.)
func ExampleFleet_FluxWatcher() {
	// serve is what runs against a member while it is in the fleet.
	serve := func(ctx context.Context, m *fleet.Member) {
		cfg, err := m.RESTConfig(ctx) // waits for the first token
		if err != nil {
			return
		}
		member, err := kubernetes.NewForConfig(cfg) // one client for good, while tokens rotate
		_, _ = member, err
	}
	run := func(ctx context.Context, mgr manager.Manager) error {
		f := fleet.New(fleet.Options{Logger: mgr.GetLogger(), OnAdd: func(ctx context.Context, m *fleet.Member) { go serve(ctx, m) }})
		defer f.Close()
		if err := mgr.Add(f.FluxWatcher(fleet.FluxOptions{Config: mgr.GetConfig(), Namespace: "fleet-members"})); err != nil {
			return err
		}
		return mgr.Start(ctx)
	}
	_ = run
}
