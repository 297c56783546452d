package piggyback

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// pluginPath is the handlers package's test plugin, built once for the run.
var pluginPath string

func TestMain(m *testing.M) {
	// The flag an operator's main (or controller-runtime) would register.
	if flag.Lookup(KubeconfigFlag) == nil {
		flag.String(KubeconfigFlag, "", "path to a kubeconfig")
	}
	dir, err := os.MkdirTemp("", "authvault-plugin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginPath = filepath.Join(dir, "plugin")
	build := exec.Command("go", "build", "-o", pluginPath, "../handlers/testdata/plugin")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test plugin:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
