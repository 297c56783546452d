package aks_test

import (
	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/vault"
)

// The AKS section of docs/cloud.md, compiled (it needs a cloud: it does not run).
func Example_readme() {
	var clusterCA []byte
	v := vault.New(vault.Options{})
	defer v.Close()
	// No credential given: DefaultAzureCredential (workload identity, managed identity, a service principal).
	v.OnLogin(aks.Login(aks.Options{Server: "https://prod-dns.hcp.westeurope.azmk8s.io:443", CAData: clusterCA}))
	// Kubeconfigs whose user runs `kubelogin get-token --login msi|workloadidentity|spn`:
	handlers.UseNative(aks.Native())
}
