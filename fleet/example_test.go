package fleet_test

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/testkit/fakewatch"
	"github.com/authvault/authvault/vault"
)

// Clusters join the fleet as their kubeconfig Secrets appear on the hub,
// and leave as the Secrets go. OnAdd gets each cluster with a context that
// ends when it leaves: what runs against the cluster runs on that context.
// (The clusters here are never used, so they never log in.)
func ExampleFleet_WatchSecrets() {
	hub := fake.NewClientset() // a hub cluster's API, for the example
	events := make(chan string, 2)
	f := fleet.New(fleet.Options{
		OnAdd: func(ctx context.Context, m *fleet.Member) {
			events <- "joined " + m.Name()
			go func() {
				<-ctx.Done()
				events <- fmt.Sprintf("left %s: %v", m.Name(), context.Cause(ctx))
			}()
		},
	})
	defer f.Close()

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	watching := fakewatch.Begun(&hub.Fake, hub.Tracker()) // the fake hub keeps no history for a watch to resume from
	go func() { done <- f.WatchSecrets(ctx, fleet.SecretsOptions{Client: hub, Namespace: "capi"}) }()
	defer func() { stop(); <-done }()
	if err := watching(); err != nil {
		panic(err)
	}

	// Cluster API's kubeconfig Secret of the cluster prod-eu.
	secrets := hub.CoreV1().Secrets("capi")
	_, _ = secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-eu-kubeconfig", Labels: map[string]string{fleet.ClusterNameLabel: "prod-eu"}},
		Data:       map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\n")},
	}, metav1.CreateOptions{})
	fmt.Println(<-events)
	_ = secrets.Delete(ctx, "prod-eu-kubeconfig", metav1.DeleteOptions{})
	fmt.Println(<-events)
	// Output:
	// joined capi/prod-eu
	// left capi/prod-eu: fleet: cluster "capi/prod-eu" has left the fleet: its Secret capi/prod-eu-kubeconfig was deleted
}

// A controller-runtime manager on the hub whose fleet is the hub's
// kubeconfig Secrets: each cluster's controllers run from when it joins
// until it leaves. (Not run: it needs a hub.)
func ExampleFleet_SecretsWatcher() {
	ctx := ctrl.SetupSignalHandler()
	hubConfig, err := vault.Default.RESTConfig(ctx) // the hub's own credentials
	if err != nil {
		panic(err)
	}
	mgr, err := ctrl.NewManager(hubConfig, ctrl.Options{LeaderElection: true, LeaderElectionID: "fleet-controller"})
	if err != nil {
		panic(err)
	}
	if err := runFleet(ctx, mgr, kubernetes.NewForConfigOrDie(hubConfig)); err != nil {
		panic(err)
	}
}

// runFleet runs mgr with a fleet of the hub's clusters until ctx ends.
// docs/fleet.md shows its lines.
func runFleet(ctx context.Context, mgr manager.Manager, hub kubernetes.Interface) error {
	f := fleet.New(fleet.Options{
		Logger:     ctrl.Log.WithName("fleet"),
		Registerer: metrics.Registry,
		// ctx ends when the cluster leaves the fleet (its Secret goes, Remove, Close).
		OnAdd: func(ctx context.Context, m *fleet.Member) {
			go runControllers(ctx, m) // m.RESTConfig(ctx) waits for the cluster's first login: not here
		},
	})
	defer f.Close()
	// The clusters of the hub's kubeconfig Secrets, watched on the leader only (NeedLeaderElection):
	if err := mgr.Add(f.SecretsWatcher(fleet.SecretsOptions{Config: mgr.GetConfig(), Namespace: "capi"})); err != nil {
		return err
	}
	// Or a cluster added by hand:
	if err := f.Add("prod-eu", handlers.KubeconfigSecret(hub.CoreV1(), "capi", "prod-eu-kubeconfig", "value")); err != nil {
		return err
	}
	cfg, err := f.RESTConfig(ctx, "prod-eu") // the same object through every rotation: informers stay
	if err != nil {
		return err
	}
	ctrl.Log.Info("cluster ready", "cluster", "prod-eu", "server", cfg.Host)
	return mgr.Start(ctx)
}

// runControllers runs a cluster.Cluster on m's config, with the
// controllers that would go with it, until ctx ends.
func runControllers(ctx context.Context, m *fleet.Member) {
	log := logr.FromContextOrDiscard(ctx) // the fleet's Logger, with the cluster's name
	cfg, err := m.RESTConfig(ctx)
	if err != nil {
		log.Error(err, "no config") // or the cluster has left, or the fleet has closed: ctx has ended
		return
	}
	cl, err := cluster.New(cfg)
	if err != nil {
		log.Error(err, "no cluster.Cluster")
		return
	}
	// ... controllers on cl.GetCache(), writing through cl.GetClient()
	if err := cl.Start(ctx); err != nil {
		log.Error(err, "cluster.Cluster stopped")
	}
}
