package eks_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/fleet"
)

// The Flux ConfigMaps of provider aws, served under a manager on the hub;
// the role is the one the ConfigMap's ServiceAccount names, and a
// ServiceAccount that names none fails its member's login, saying so.
func ExampleFlux() {
	providers := map[string]fleet.FluxProvider{"aws": eks.Flux(eks.FluxOptions{})}
	watch := func(mgr manager.Manager, f *fleet.Fleet) error {
		return mgr.Add(f.FluxWatcher(fleet.FluxOptions{Config: mgr.GetConfig(), Namespace: "fleet-members", Providers: providers}))
	}
	_ = watch // it needs a hub: here it only compiles

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-members", Name: "deployer"}}
	_, err := providers["aws"].New(context.Background(), fleet.FluxCluster{
		ConfigMap:      "fleet-members/prod-eu",
		Cluster:        "arn:aws:eks:eu-west-1:111122223333:cluster/prod-eu",
		ServiceAccount: sa,
	})
	fmt.Println(err)
	// Output:
	// eks: ServiceAccount fleet-members/deployer has no eks.amazonaws.com/role-arn annotation: the IAM role the hub's token is exchanged for
}
