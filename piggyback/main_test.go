package piggyback

import (
	"flag"
	"os"
	"testing"

	"github.com/authvault/authvault/testkit/testplugin"
)

// pluginPath is the handlers package's test plugin, built once for the run.
var pluginPath string

func TestMain(m *testing.M) {
	// The flag an operator's main (or controller-runtime) would register.
	if flag.Lookup(KubeconfigFlag) == nil {
		flag.String(KubeconfigFlag, "", "path to a kubeconfig")
	}
	os.Exit(testplugin.Main(m, &pluginPath))
}
