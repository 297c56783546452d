package aks_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/vault"
)

// A vault logged in to an AKS cluster as a service principal. Here Entra
// ID is a loopback stand-in; in a cluster, leave Credential out:
// DefaultAzureCredential finds AKS's workload identity or the node's
// managed identity.
func ExampleLogin() {
	var entra *httptest.Server
	entra = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet { // the tenant's OpenID configuration
			fmt.Fprintf(w, `{"token_endpoint":%q,"authorization_endpoint":%[1]q,"issuer":%[1]q}`, entra.URL+"/contoso/oauth2/v2.0/token")
			return
		}
		fmt.Fprint(w, `{"token_type":"Bearer","expires_in":3600,"access_token":"eyJ.example"}`)
	}))
	defer entra.Close()
	cred, _ := azidentity.NewClientSecretCredential("contoso", "operator-app", "s3cret",
		&azidentity.ClientSecretCredentialOptions{
			ClientOptions: azcore.ClientOptions{
				Cloud:     cloud.Configuration{ActiveDirectoryAuthorityHost: entra.URL + "/"},
				Transport: entra.Client(),
			},
			DisableInstanceDiscovery: true,
		})

	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(aks.Login(aks.Options{
		Server:     "https://prod-dns-1a2b3c.hcp.westeurope.azmk8s.io:443",
		CAData:     testCA(), // from the cluster's kubeconfig
		Credential: cred,
	}), login.ID("aks"))

	c, err := v.Select(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Handler, c.Info.Server, time.Until(c.Info.Expiration).Round(time.Hour))
	// Output: aks https://prod-dns-1a2b3c.hcp.westeurope.azmk8s.io:443 1h0m0s
}

// Kubeconfigs whose user runs `kubelogin get-token --login
// workloadidentity` (or msi, or spn) log in in process: no kubelogin in
// the image, one token for every caller, refreshed before it expires. (It
// needs a cluster: it does not run.)
func ExampleNative() {
	handlers.UseNative(aks.Native())
	v := vault.New(vault.Options{})
	defer v.Close()
	v.OnLogin(piggyback.Kubeconfig) // the kubeconfig kubelogin convert-kubeconfig wrote
}

// A fleet member on AKS with nothing stored but its address and CA: the
// hub mints a token for its ServiceAccount, Entra ID exchanges it for the
// application whose federated identity credential trusts the hub, and the
// member takes Entra ID's token. (It needs a cloud: it does not run.)
func ExampleFederated() {
	ctx := context.Background()
	hubVault := vault.New(vault.Options{}) // the hub's own credential
	defer hubVault.Close()
	hub, err := hubVault.RESTConfig(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	var clusterCA []byte // the member's CA, from its kubeconfig

	member := vault.New(vault.Options{})
	defer member.Close()
	member.OnLogin(federation.Login(federation.Config{
		Hub:       hub,
		Namespace: "fleet-system", ServiceAccount: "fleet-operator",
		Audiences: []string{aks.FederatedAudience},
		Member:    federation.Member{Server: "https://prod-dns-1a2b3c.hcp.westeurope.azmk8s.io:443", CAData: clusterCA},
		Provider: aks.Federated(aks.FederatedOptions{
			TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47",
			ClientID: "3f2a8c1e-5b7d-4e9f-a0c2-6d8e1f3b5a7c", // the app registration or managed identity
		}),
	}))
}
