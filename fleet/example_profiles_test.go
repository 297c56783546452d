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

	"github.com/authvault/authvault/fleet"
)

// A fleet from the ClusterProfiles of a hub: the provider file (the
// process's own configuration) says which plugin reaches the clusters of
// a provider; a profile that offers it joins the fleet as
// "<namespace>/<name>", one that offers none of the file's providers is
// logged and left out. (The cluster here is never used, so it never logs
// in, and its plugin never runs.)
func ExampleFleet_WatchClusterProfiles() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "clusterprofile-provider-file.json")
	_ = os.WriteFile(file, []byte(`{"providers": [{"name": "google", "execConfig": {
		"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin",
		"args": ["--use_application_default_credentials"], "provideClusterInfo": true}}]}`), 0o600)
	providers, err := fleet.ReadProviderFile(file) // the --clusterprofile-provider-file flag
	if err != nil {
		panic(err)
	}

	profiles := schema.GroupVersionResource{Group: fleet.ProfileGroup, Version: "v1alpha1", Resource: "clusterprofiles"}
	hub := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), // a hub's API, for the example
		map[schema.GroupVersionResource]string{profiles: "ClusterProfileList"})
	joined := make(chan string, 1)
	f := fleet.New(fleet.Options{OnAdd: func(_ context.Context, m *fleet.Member) { joined <- m.Name() }})
	defer f.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.WatchClusterProfiles(ctx, fleet.ProfilesOptions{Client: hub, Providers: providers}) }()
	defer func() { stop(); <-done }()

	for _, p := range []struct{ name, provider string }{{"elsewhere", "aws"}, {"prod-eu", "google"}} {
		profile := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": fleet.ProfileGroup + "/v1alpha1", "kind": "ClusterProfile",
			"metadata": map[string]any{"namespace": "inventory", "name": p.name},
			"status": map[string]any{"accessProviders": []any{map[string]any{
				"name":    p.provider,
				"cluster": map[string]any{"server": "https://" + p.name + ".example", "certificate-authority-data": "Q0E="},
			}}},
		}}
		_, _ = hub.Resource(profiles).Namespace("inventory").Create(ctx, profile, metav1.CreateOptions{})
	}
	fmt.Println("joined", <-joined)
	fmt.Println(f.Names())
	// Output:
	// joined inventory/prod-eu
	// [inventory/prod-eu]
}
