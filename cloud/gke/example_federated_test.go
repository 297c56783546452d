package gke_test

import (
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/vault"
)

// A member GKE cluster reached with the hub's ServiceAccount tokens,
// exchanged at Google's STS through a workload identity pool provider that
// trusts the hub's issuer, then used to impersonate a service account. It
// needs a hub and Google: it does not run.
func ExampleFederated() {
	var (
		hub       *rest.Config // the hub's own vault's config: hubVault.RESTConfig(ctx)
		clusterCA []byte       // the member's masterAuth.clusterCaCertificate
	)
	provider := "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/fleet/providers/hub"

	member := vault.New(vault.Options{NoFallback: true})
	defer member.Close()
	member.OnLogin(federation.Login(federation.Config{
		Hub:       hub,
		Namespace: "fleet-system", ServiceAccount: "fleet-operator",
		Audiences: []string{gke.AllowedAudience(provider)},
		Member:    federation.Member{Server: "https://34.118.0.10", CAData: clusterCA},
		Provider: gke.Federated(gke.FederatedOptions{
			Audience:       provider,
			ServiceAccount: "fleet@my-project.iam.gserviceaccount.com", // leave out to use the federated token itself
		}),
	}))
}

// The audience to mint the hub's tokens for, when the pool provider lists
// no allowed audiences of its own.
func ExampleAllowedAudience() {
	fmt.Println(gke.AllowedAudience("//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/fleet/providers/hub"))
	// Output: https://iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/fleet/providers/hub
}
