package piggyback_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/vault"
)

// Outside a cluster, the in-cluster handler has nothing to offer: it returns
// (nil, nil), and the vault goes on with its other handlers.
func ExampleServiceAccount() {
	defer setenv("KUBERNETES_SERVICE_HOST", "")() // as outside a cluster, wherever this runs
	info, err := piggyback.ServiceAccount(context.Background())
	fmt.Println(info == nil, err)
	// Output: true <nil>
}

// A kubeconfig is read on every login, so that edits to it are picked up.
func ExampleKubeconfigFrom() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config")
	_ = os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: prod, cluster: {server: "https://api.example:6443"}}]
users: [{name: ops, user: {token: from-the-kubeconfig}}]
contexts: [{name: prod, context: {cluster: prod, user: ops, namespace: team-a}}]
current-context: prod
`), 0o600)
	info, err := piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path})(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Server, info.DefaultNamespace, info.Token != "")
	// Output: https://api.example:6443 team-a true
}

// With no handler registered, a vault falls back on Defaults: here the
// kubeconfig $KUBECONFIG names, as a shell would set it.
func ExampleDefaults() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config")
	_ = os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "https://dev.example:6443"}}]
users: [{name: me, user: {token: t}}]
contexts: [{name: dev, context: {cluster: dev, user: me}}]
current-context: dev
`), 0o600)
	defer setenv("KUBECONFIG", path)()
	// Neither the in-cluster ServiceAccount nor the ~/.kube/config of
	// whoever runs this takes part (its exec plugin would run).
	defer setenv("KUBERNETES_SERVICE_HOST", "")()
	defer setenv("HOME", dir)()

	v := vault.New(vault.Options{})
	defer v.Close()
	cred, err := v.Select(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cred.Handler + ": " + cred.Info.Server)
	// Output: kubeconfig from --kubeconfig or $KUBECONFIG: https://dev.example:6443
}

// setenv sets the environment variable key to value, or unsets it when
// value is empty, and returns what puts it back.
func setenv(key, value string) (restore func()) {
	old, had := os.LookupEnv(key)
	if value == "" {
		_ = os.Unsetenv(key)
	} else {
		_ = os.Setenv(key, value)
	}
	return func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	}
}
