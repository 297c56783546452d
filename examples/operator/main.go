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
	namespace := flag.String("namespace", "default", "the namespace whose ConfigMaps to annotate")
	tokenFile := flag.String("token-file", "", "log in with the token in this file (reread on rotation) instead of the fallback")
	server := flag.String("server", "", "with --token-file: the API server's URL")
	caFile := flag.String("ca-file", "", "with --token-file: the API server's CA")
	leaderElect := flag.Bool("leader-elect", true, "elect a leader among replicas")
	runFor := flag.Duration("run-for", 0, "stop after this long (0: until interrupted)")
	probeAddr := flag.String("health-probe-bind-address", "0", "serve /readyz and /healthz here, e.g. :8081 (0: off)")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("operator")

	ctx := ctrl.SetupSignalHandler()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}

	v := vault.New(vault.Options{Logger: ctrl.Log, Registerer: metrics.Registry})
	defer v.Close()
	if *tokenFile != "" {
		v.OnLogin(handlers.TokenFile(*tokenFile, login.ConnectionInfo{Server: *server, CAPath: *caFile}),
			login.ID("token-file"), login.Timeout(10*time.Second))
	}
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		log.Error(err, "no credential")
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "authvault-example-operator",
		LeaderElectionNamespace: *namespace,
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  *probeAddr,
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	// Unready while the operator cannot authenticate: a login round failed,
	// or a re-login has hung for a minute (vault.Options.ReadyGrace).
	if err := mgr.AddReadyzCheck("authvault", v.Ready); err != nil {
		log.Error(err, "adding the readiness check")
		os.Exit(1)
	}
	r := &annotator.Reconciler{Client: mgr.GetClient()}
	if err := r.SetupWithManager(mgr); err != nil {
		log.Error(err, "setting up the reconciler")
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
	fmt.Printf("reconciled %d, failed %d\n", r.Reconciled.Load(), r.Failed.Load())
}
