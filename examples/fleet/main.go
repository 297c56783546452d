// Command fleet is a multi-cluster controller: a controller-runtime manager
// on a hub cluster that finds its workload clusters in kubeconfig Secrets
// (Cluster API's <cluster>-kubeconfig) and runs a controller in each, which
// annotates every ConfigMap it sees. Every cluster's credentials live in
// its own vault of one authvault fleet: a Secret rewritten with a new token
// refreshes that cluster's vault, and its cache and controller go on
// without a restart or a relist. A Secret deleted stops its cluster's
// controller; created again, it brings the cluster back with a new one.
//
//	go run ./examples/fleet --kubeconfig hub.kubeconfig --namespace capi-clusters
//	go run ./examples/fleet --allow-plugins aws-iam-authenticator,kubelogin   # kubeconfigs with these plugins
//
// With --shard-group, replicas of the program share the clusters on Leases
// of --shard-namespace (fleet.Shards): each logs in to, and runs the
// controller of, only the clusters it owns. examples/sharded-fleet deploys
// three; on make cluster, run three in three terminals:
//
//	go run ./examples/fleet --kubeconfig bin/cluster/kubeconfig --shard-group fleet --shard-namespace default --identity r1
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/vault"
)

func main() {
	// controller-runtime registers --kubeconfig when it is imported; the
	// hub's vault falls back on it (piggyback.Defaults).
	if flag.Lookup("kubeconfig") == nil {
		flag.String("kubeconfig", "", "the hub's kubeconfig")
	}
	var o options
	flag.StringVar(&o.secrets, "namespace", "", "the hub namespace of the kubeconfig Secrets (default: every namespace)")
	flag.StringVar(&o.workloadNamespace, "workload-namespace", "default", "the namespace whose ConfigMaps to annotate in each cluster")
	flag.StringVar(&o.allow, "allow-plugins", "", "comma-separated exec plugins the kubeconfigs may run (default: none)")
	flag.DurationVar(&o.runFor, "run-for", 0, "stop after this long (0: until interrupted)")
	flag.StringVar(&o.shardGroup, "shard-group", "", "share the clusters with the other replicas of this group (default: this process serves every cluster)")
	flag.StringVar(&o.shardNamespace, "shard-namespace", "", "the hub namespace of the group's Leases (with --shard-group)")
	flag.StringVar(&o.identity, "identity", os.Getenv("POD_NAME"), "this replica, unique in its group (default: $POD_NAME, else the host name)")
	logOpts := zap.Options{}
	logOpts.BindFlags(flag.CommandLine) // the quickstart's --zap-* flags
	verbosity := flag.Int("v", 0, "log verbosity: 1 names each cluster this replica takes (\"cluster taken\") or gives up; at 0, \"took clusters\" names the first ten of a batch")
	flag.Parse()
	if *verbosity > 0 {
		logOpts.Level = zapcore.Level(-*verbosity)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOpts)))
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.WithName("fleet-example").Error(err, "stopped")
		os.Exit(1) // after run has returned: every vault is closed
	}
}

// options are the command line's.
type options struct {
	secrets, workloadNamespace, allow string
	runFor                            time.Duration
	shardGroup, shardNamespace        string
	identity                          string
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("fleet-example")
	if o.runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.runFor)
		defer cancel()
	}

	// The hub's own credentials, in a vault of their own. Its metrics sit
	// beside the fleet's on one registry, labelled cluster="hub" here
	// (cluster="" without the wrapper).
	hubVault := vault.New(vault.Options{
		Logger:     ctrl.Log.WithName("hub"),
		Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"cluster": "hub"}, metrics.Registry),
	})
	// After the manager has stopped, and its last requests have gone.
	defer hubVault.Shutdown(context.Background())
	hubConfig, err := hubVault.RESTConfig(ctx)
	if err != nil {
		return fmt.Errorf("no credential for the hub: %w", err)
	}
	mgr, err := ctrl.NewManager(hubConfig, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	// Each cluster's controller runs from when the cluster joins the fleet
	// until it leaves (the context OnAdd gets ends).
	members := newEngagements(mgr, o.workloadNamespace, log)
	opts := fleet.Options{
		Logger:     ctrl.Log.WithName("fleet"),
		Registerer: metrics.Registry,
		OnAdd:      members.engage,
	}
	if o.shardGroup != "" {
		// Every replica watches the Secrets; each runs the controllers of
		// the clusters it owns, and a cluster's owner is one replica.
		opts.Shards = &fleet.Shards{Config: hubConfig, Namespace: o.shardNamespace, Group: o.shardGroup, Identity: o.identity}
		if o.shardNamespace == "" {
			return fmt.Errorf("--shard-group needs --shard-namespace")
		}
	}
	f := fleet.New(opts)
	defer f.Close()

	policy := handlers.DenyAll
	if o.allow != "" {
		policy = handlers.Allowlist(strings.Split(o.allow, ",")...)
	}
	// The watch of the Secrets runs with the manager, on its leader (the
	// controllers it starts write) or, sharded, on every replica, and
	// stops with it.
	err = mgr.Add(f.SecretsWatcher(fleet.SecretsOptions{Config: hubConfig, Namespace: o.secrets, PluginPolicy: policy}))
	if err != nil {
		return fmt.Errorf("adding the Secrets' watch: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager stopped: %w", err)
	}
	for _, line := range members.report() {
		fmt.Println(line)
	}
	return nil
}
