// Command operator is a controller-runtime operator whose every client,
// cache and leader election goes through an authvault vault. It annotates
// the ConfigMaps of one namespace.
//
// Without --token-file it logs in with the vault's fallback: --kubeconfig,
// $KUBECONFIG, the in-cluster ServiceAccount, ~/.kube/config.
//
//	go run ./examples/operator --kubeconfig ~/.kube/config --namespace default
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/authvault/authvault/examples/operator/annotator"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

func main() {
	// controller-runtime registers --kubeconfig when it is imported; the
	// vault's fallback reads it.
	if flag.Lookup("kubeconfig") == nil {
		flag.String("kubeconfig", "", "a kubeconfig")
	}
	var o options
	flag.StringVar(&o.namespace, "namespace", "default", "the namespace whose ConfigMaps to annotate")
	flag.StringVar(&o.tokenFile, "token-file", "", "log in with the token in this file (reread on rotation) instead of the fallback")
	flag.StringVar(&o.server, "server", "", "with --token-file: the API server's URL")
	flag.StringVar(&o.caFile, "ca-file", "", "with --token-file: the API server's CA")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader among replicas")
	flag.DurationVar(&o.runFor, "run-for", 0, "stop after this long (0: until interrupted)")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", "0", "serve /readyz and /healthz here, e.g. :8081 (0: off)")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.WithName("operator").Error(err, "operator stopped")
		os.Exit(1) // after run has returned: its deferred Shutdown has stopped every login
	}
}

// options are the command line's.
type options struct {
	namespace, tokenFile, server, caFile, probeAddr string
	leaderElect                                     bool
	runFor                                          time.Duration
}

func run(ctx context.Context, o options) error {
	if o.runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.runFor)
		defer cancel()
	}

	v := vault.New(vault.Options{Logger: ctrl.Log.WithName("authvault"), Registerer: metrics.Registry})
	// After the manager has stopped, and its last requests have gone.
	defer v.Shutdown(context.Background())
	if o.tokenFile != "" {
		v.OnLogin(handlers.TokenFile(o.tokenFile, login.ConnectionInfo{Server: o.server, CAPath: o.caFile}),
			login.ID("token-file"), login.Timeout(10*time.Second))
	}
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		return fmt.Errorf("no credential: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "authvault-example-operator",
		LeaderElectionNamespace:       o.namespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cache.Options{DefaultNamespaces: map[string]cache.Config{o.namespace: {}}},
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        o.probeAddr,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	// Unready while the operator cannot authenticate: a login round failed,
	// or a re-login has hung for a minute (vault.Options.ReadyGrace).
	if err := mgr.AddReadyzCheck("authvault", v.Ready); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	r := &annotator.Reconciler{Client: mgr.GetClient()}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the reconciler: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager stopped: %w", err)
	}
	fmt.Printf("reconciled %d, failed %d\n", r.Reconciled.Load(), r.Failed.Load())
	return nil
}
