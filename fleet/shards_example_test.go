package fleet_test

import (
	"context"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/vault"
)

// Replicas of one operator share the hub's clusters: each runs the
// controllers of, and logs in to, only the clusters it owns. (Not run: it
// needs a hub; examples/sharded-fleet deploys three replicas.)
func ExampleShards() {
	ctx := ctrl.SetupSignalHandler()
	hubConfig, err := vault.Default.RESTConfig(ctx)
	if err != nil {
		panic(err)
	}
	mgr, err := ctrl.NewManager(hubConfig, ctrl.Options{})
	if err != nil {
		panic(err)
	}
	if err := runShardedFleet(ctx, mgr); err != nil {
		panic(err)
	}
}

// runShardedFleet runs mgr with this replica's share of the hub's
// clusters until ctx ends. docs/fleet.md shows its lines.
func runShardedFleet(ctx context.Context, mgr manager.Manager) error {
	f := fleet.New(fleet.Options{
		Logger:     ctrl.Log.WithName("fleet"), // takeovers and handovers: without it, none is logged
		Registerer: metrics.Registry,
		OnAdd: func(ctx context.Context, m *fleet.Member) {
			go runControllers(ctx, m) // ctx also ends when the cluster moves to another replica
		},
		Shards: &fleet.Shards{
			Config:    mgr.GetConfig(), // the hub, which holds the Leases
			Namespace: "my-operator",   // RBAC: leases get, list, watch, create, update, delete
			Group:     "clusters",
			Identity:  os.Getenv("POD_NAME"), // unique per replica; default: the host name
		},
	})
	defer f.Close() // hands this replica's clusters to the others at once
	// On every replica: each sees every cluster and starts only its own.
	if err := mgr.Add(f.SecretsWatcher(fleet.SecretsOptions{Config: mgr.GetConfig(), Namespace: "capi"})); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
