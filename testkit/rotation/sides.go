package rotation

import (
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/vault"
)

// The two sides of a comparison, with the same exec plugin on the same
// cluster.

// PluginVault is a vault that logs in with exec through handlers.Exec; the
// caller closes it.
func PluginVault(cluster *testcluster.Cluster, exec *clientcmdapi.ExecConfig) *vault.Vault {
	v := vault.New(vault.Options{NoFallback: true})
	v.OnLogin(handlers.Exec(handlers.ExecConfig{
		ExecConfig: *exec,
		Cluster:    login.ConnectionInfo{Server: cluster.Server, CAData: cluster.CAData},
	}), login.ID("plugin"), login.Timeout(30*time.Second))
	return v
}

// PluginConfig is plain client-go running exec itself, as a kubeconfig's
// exec user does.
func PluginConfig(cluster *testcluster.Cluster, exec *clientcmdapi.ExecConfig) *rest.Config {
	return &rest.Config{Host: cluster.Server, TLSClientConfig: rest.TLSClientConfig{CAData: cluster.CAData}, ExecProvider: exec}
}
