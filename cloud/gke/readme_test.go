package gke_test

import (
	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/vault"
)

// The GKE section of docs/cloud.md, compiled (it needs a cloud: it does not run).
func Example_readme() {
	var clusterCA []byte
	v := vault.New(vault.Options{})
	defer v.Close()
	// No credentials given: Application Default Credentials (workload identity, a key, external_account).
	v.OnLogin(gke.Login(gke.Options{Server: "https://34.118.0.10", CAData: clusterCA}))
}
