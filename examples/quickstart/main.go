// Command quickstart is the operator main that the README quotes, whole: a
// login of its own beside the credentials the process already has, a
// controller-runtime manager on the vault, and a shutdown that lets the
// manager finish before the vault closes. It runs as it is:
//
//	go run ./examples/quickstart --kubeconfig ~/.kube/config
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

func main() {
	metricsAddr := flag.String("metrics-bind-address", ":8080", "serve /metrics here (0: off)")
	probeAddr := flag.String("health-probe-bind-address", ":8081", "serve /healthz and /readyz here (0: off)")
	logOpts := zap.Options{}
	logOpts.BindFlags(flag.CommandLine) // --zap-log-level=debug shows the vault's per-request lines
	flag.Parse()                        // controller-runtime's --kubeconfig too: the vault's fallback reads it
	// Without it, controller-runtime drops every line, the vault's too.
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOpts)))
	if err := run(ctrl.SetupSignalHandler(), *metricsAddr, *probeAddr); err != nil {
		ctrl.Log.Error(err, "operator stopped")
		os.Exit(1) // after run has returned: its deferred Shutdown has stopped every login
	}
}

func run(ctx context.Context, metricsAddr, probeAddr string) error {
	v := vault.New(vault.Options{
		Logger:     ctrl.Log.WithName("authvault"),
		Registerer: metrics.Registry,
		// fromSecretStore first; while it gives nothing, what the process
		// has: --kubeconfig or $KUBECONFIG, the in-cluster ServiceAccount,
		// ~/.kube/config.
		KeepFallback: true,
	})
	// Shutdown, not Close: the manager sends its last events through the
	// vault after Start has returned.
	defer v.Shutdown(context.Background())
	v.OnLogin(fromSecretStore, login.ID("secret-store"), login.Retries(3), login.Timeout(30*time.Second))

	// Waits for the first login; one that fails leaves the manager up and
	// unready, and the vault logs in again by itself. Every request goes
	// through the vault.
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		return err // ctx ended first
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		return err
	}
	// Unready while the vault cannot authenticate (a failed login round, or
	// one that has hung for a minute).
	if err := mgr.AddReadyzCheck("authvault", v.Ready); err != nil {
		return err
	}
	// Health checks, webhooks and metrics handlers go above, on every
	// replica; reconcilers go below, on the replica that holds the lease,
	// which it hands on once they have stopped (elect.go).
	return runElected(ctx, mgr, cfg, leaseNamespace(v), "my-operator", func() error {
		return nil // Register your reconcilers with mgr here.
	})
}

// leaseNamespace is where the replicas' lease is: the pod's namespace
// (POD_NAMESPACE, from the Downward API), else the credential's, which is
// "default" before a first login: replicas must agree on it whatever
// their logins did.
func leaseNamespace(v *vault.Vault) string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return v.Namespace()
}

// fromSecretStore is a login handler of your own: here it reads a server,
// CA and token from the JSON file that $SECRET_STORE names (a stand-in for
// a secret store's API), and gives nothing while $SECRET_STORE is unset, so
// that the fallback serves. Its errors name the store, never the token.
func fromSecretStore(ctx context.Context) (*login.ConnectionInfo, error) {
	path := os.Getenv("SECRET_STORE")
	if path == "" {
		return nil, nil // nothing from me
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entry struct{ Server, CAData, Token string }
	if err := json.Unmarshal(data, &entry); err != nil {
		return nil, login.Permanent(fmt.Errorf("secret store %s: not a JSON object of server, caData and token", path))
	}
	return &login.ConnectionInfo{Server: entry.Server, CAData: []byte(entry.CAData), Token: entry.Token}, nil
}
