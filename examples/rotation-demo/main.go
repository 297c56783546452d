// Command rotation-demo shows authvault keeping an operator authenticated
// while its tokens are revoked under it, on an embedded kube-apiserver, and
// compares the same workload through plain client-go.
//
//	make demo                      # builds the envtest binaries if missing, runs ~1 min
//	go run ./examples/rotation-demo --duration 2m --revoke-after 3s
//	go run ./examples/rotation-demo --kubeconfig ~/.kube/config   # the operator part on a real cluster
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/authvault/authvault/examples/operator/annotator"
	"github.com/authvault/authvault/internal/testkit/rotation"
	"github.com/authvault/authvault/internal/testkit/testcluster"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/vault"
)

func main() {
	// The demo is also its own credential plugin: client-go and the vault
	// run it to fetch a token from the demo's issuer.
	if os.Getenv("PLUGIN_MODE") == "fetch" {
		os.Exit(plugin(os.Getenv("PLUGIN_FETCH_URL")))
	}
	duration := flag.Duration("duration", time.Minute, "how long the whole comparison runs (half for each side)")
	revokeAfter := flag.Duration("revoke-after", 5*time.Second, "how long after its issue a token is revoked")
	workers := flag.Int("workers", 8, "concurrent workers creating, updating, listing and deleting ConfigMaps")
	// controller-runtime registers --kubeconfig when it is imported.
	if flag.Lookup("kubeconfig") == nil {
		flag.String("kubeconfig", "", "")
	}
	flag.Lookup("kubeconfig").Usage = "run the workload against this cluster instead of the embedded one"
	flag.Parse()
	kubeconfig := ptr(flag.Lookup("kubeconfig").Value.String())

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var err error
	if *kubeconfig != "" {
		err = realCluster(ctx, *kubeconfig, *workers, *duration)
	} else {
		err = embedded(ctx, *workers, *duration, *revokeAfter)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rotation-demo:", err)
		os.Exit(1)
	}
}

// embedded runs the comparison on an embedded API server.
func embedded(ctx context.Context, workers int, duration, revokeAfter time.Duration) error {
	fmt.Println("starting kube-apiserver and etcd, with a token issuer as its webhook authenticator ...")
	cluster, err := testcluster.Start()
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(cluster.Admin)
	if err != nil {
		return err
	}
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("API server %s; every token is revoked %v after its issue (the server notices within %v more)\n\n",
		cluster.Server, revokeAfter, testcluster.ReviewCacheTTL)

	operator := &annotator.Reconciler{}
	sides, err := rotation.Compare(ctx, rotation.CompareOptions{
		Cluster: cluster, Namespace: ns.Name, Plugin: self,
		Workers: workers, Duration: duration / 2, RevokeAfter: revokeAfter,
		WithVault: func(ctx context.Context, cfg *rest.Config) (func(), error) {
			return runOperator(ctx, cfg, admin, operator)
		},
		Progress: func(side string, requests, unauthorized, other, runs int64) {
			fmt.Printf("\r%-22s requests %7d  401s seen by callers %4d  other errors %3d  plugin runs %3d  operator reconciles %5d (errors %d)",
				side, requests, unauthorized, other, runs, operator.Reconciled.Load(), operator.Failed.Load())
		},
	})
	fmt.Println()
	if err != nil {
		return err
	}
	fmt.Printf("\n%d workers, %v each side, tokens revoked %v after issue:\n\n%s", workers, duration/2, revokeAfter, rotation.Table(sides))
	for _, s := range sides {
		if s.Stats.FirstError != nil {
			fmt.Printf("errors through %s: %v; the first: %v\n", s.Name, s.Stats.Reasons, s.Stats.FirstError)
		}
	}
	fmt.Printf("\nThe operator (a controller-runtime manager with leader election, through the same vault) reconciled %d ConfigMaps with %d errors.\n",
		operator.Reconciled.Load(), operator.Failed.Load())
	fmt.Println("client-go hands callers the 401 that makes it rerun its plugin; the vault retries the request with a fresh token.")
	return nil
}

// runOperator starts the annotator in a controller-runtime manager on cfg,
// with leader election, in a namespace of its own where the admin creates a
// ConfigMap five times a second; it returns what stops both.
func runOperator(ctx context.Context, cfg *rest.Config, admin kubernetes.Interface, r *annotator.Reconciler) (func(), error) {
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "operator-"}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	namespace := ns.Name
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection: true, LeaderElectionID: "rotation-demo", LeaderElectionNamespace: namespace,
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
		Logger:  logr.Discard(),
	})
	if err != nil {
		return nil, err
	}
	r.Client = mgr.GetClient()
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "\noperator:", err)
		}
	}()
	go func() { // the work the operator is there for
		defer func() { done <- struct{}{} }()
		for i := 0; ctx.Err() == nil; i++ {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("work-%d", i)}}
			_, _ = admin.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done; <-done }, nil
}

// realCluster runs the workload through a vault with the kubeconfig's
// credentials, against a cluster of the user's.
func realCluster(ctx context.Context, kubeconfig string, workers int, duration time.Duration) error {
	v := vault.New(vault.Options{NoFallback: true, Logger: logr.Discard()})
	defer v.Close()
	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: kubeconfig}), login.ID("kubeconfig"), login.Timeout(time.Minute))
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := v.Namespace()
	fmt.Printf("running %d workers for %v in namespace %s of %s\n", workers, duration, ns, cfg.Host)
	stats := rotation.Run(ctx, cs, ns, workers, duration, func(requests, unauthorized, other int64) {
		fmt.Printf("\rrequests %7d  401s seen by callers %4d  other errors %3d", requests, unauthorized, other)
	})
	fmt.Printf("\n\n%s", rotation.Table([]rotation.Side{{Name: "authvault", Stats: stats}}))
	if stats.FirstError != nil {
		fmt.Println("first error:", stats.FirstError)
	}
	return nil
}

// plugin is the credential plugin: it fetches a token and prints an
// ExecCredential.
func plugin(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	var got struct {
		Token   string `json:"token"`
		Expires string `json:"expires"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Token == "" {
		fmt.Fprintln(os.Stderr, "no token:", errors.Join(err, errors.New(resp.Status)))
		return 1
	}
	status := map[string]string{"token": got.Token}
	if got.Expires != "" {
		status["expirationTimestamp"] = got.Expires
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status,
	})
	return 0
}

func ptr[T any](v T) *T { return &v }
