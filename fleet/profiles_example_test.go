package fleet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/fakewatch"
)

// Clusters join the fleet as ClusterProfiles that offer a provider of the
// provider file appear on the hub, and leave as they go. (The clusters here
// are never used: their plugin never runs.)
func ExampleFleet_WatchClusterProfiles() {
	profiles := schema.GroupVersionResource{Group: fleet.ProfileGroup, Version: "v1alpha1", Resource: "clusterprofiles"}
	hub := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{profiles: "ClusterProfileList"}) // a hub's API, for the example
	file := filepath.Join(os.TempDir(), "authvault-example-providers.json")
	_ = os.WriteFile(file, []byte(`{"providers": [{"name": "google", "execConfig": {
		"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin", "provideClusterInfo": true}}]}`), 0o600)
	defer os.Remove(file)
	providers, err := fleet.ReadProviderFile(file)
	if err != nil {
		panic(err)
	}

	events := make(chan string, 2)
	f := fleet.New(fleet.Options{
		OnAdd:    func(_ context.Context, m *fleet.Member) { events <- "joined " + m.Name() },
		OnRemove: func(m *fleet.Member) { events <- "left " + m.Name() },
	})
	defer f.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	watching := fakewatch.Begun(&hub.Fake, hub.Tracker()) // the fake hub keeps no history for a watch to resume from
	go func() {
		done <- f.WatchClusterProfiles(ctx, fleet.ProfilesOptions{Client: hub, Namespace: "inventory", Providers: providers})
	}()
	defer func() { stop(); <-done }()
	if err := watching(); err != nil {
		panic(err)
	}

	// A cluster manager's profile of the cluster prod-eu, reachable through "google".
	profile := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
		"metadata": map[string]any{"namespace": "inventory", "name": "prod-eu"},
		"status": map[string]any{"accessProviders": []any{map[string]any{
			"name": "google", "cluster": map[string]any{"server": "https://34.118.0.10", "certificate-authority-data": "LS0t"},
		}}},
	}}
	_, _ = hub.Resource(profiles).Namespace("inventory").Create(ctx, profile, metav1.CreateOptions{})
	fmt.Println(<-events)
	_ = hub.Resource(profiles).Namespace("inventory").Delete(ctx, "prod-eu", metav1.DeleteOptions{})
	fmt.Println(<-events)
	// Output:
	// joined inventory/prod-eu
	// left inventory/prod-eu
}

// addProfiles adds the hub's ClusterProfiles to f on mgr's leader.
// docs/fleet.md shows its lines.
func addProfiles(mgr manager.Manager, f *fleet.Fleet) error {
	providers, err := fleet.ReadProviderFile("/etc/fleet/providers.json") // KEP-5339's provider file
	if err != nil {
		return err
	}
	// The clusters of the hub's ClusterProfiles, named <namespace>/<name>, watched on the leader only:
	if err := mgr.Add(f.ProfilesWatcher(fleet.ProfilesOptions{Config: mgr.GetConfig(), Providers: providers})); err != nil {
		return err
	}
	return nil
}

var _ = addProfiles
