package handlers

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/authvault/authvault/internal/testplugin"
)

// pluginPath is the test plugin (testdata/plugin), built once for the run.
var pluginPath string

func TestMain(m *testing.M) {
	path, cleanup, err := testplugin.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginPath = path
	code := m.Run()
	cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
