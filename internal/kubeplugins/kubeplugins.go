// Package kubeplugins gives internal/kubeconf the handlers it runs a
// kubeconfig's exec plugin and token file with, for the packages that build
// on handlers (piggyback, fleet); handlers itself passes its own.
package kubeplugins

import (
	"context"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/internal/kubeconf"
	"github.com/authvault/authvault/login"
)

// Plugins runs exec plugins with handlers.Exec and token files with
// handlers.TokenFile.
var Plugins = kubeconf.Plugins{
	Exec: func(ctx context.Context, exec clientcmdapi.ExecConfig, cluster login.ConnectionInfo, disableCompression bool) (*login.ConnectionInfo, error) {
		return handlers.Exec(handlers.ExecConfig{ExecConfig: exec, Cluster: cluster, DisableCompression: disableCompression})(ctx)
	},
	TokenFile: func(ctx context.Context, path string, cluster login.ConnectionInfo) (*login.ConnectionInfo, error) {
		return handlers.TokenFile(path, cluster)(ctx)
	},
	Native: func(exec clientcmdapi.ExecConfig) bool {
		_, ok := handlers.ServedNatively(exec)
		return ok
	},
}
