package piggyback_test

import (
	"fmt"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/vault"
)

// An operator that runs in its cluster, or on a developer's machine with a
// kubeconfig: both handlers are registered, and the vault uses whichever
// has a credential.
func ExampleServiceAccount() {
	v := vault.New(vault.Options{})
	defer v.Close()
	v.OnLogin(piggyback.ServiceAccount, login.ID("service account"))
	v.OnLogin(piggyback.Kubeconfig, login.ID("kubeconfig"))
	fmt.Println("registered")
	// Output: registered
}

// The fallback handlers, in their order.
func ExampleDefaults() {
	for _, r := range piggyback.Defaults() {
		fmt.Println(login.Configure(r.Handler, r.Options...).ID)
	}
	// Output:
	// kubeconfig from --kubeconfig or $KUBECONFIG
	// in-cluster service account
	// kubeconfig from ~/.kube/config
}
