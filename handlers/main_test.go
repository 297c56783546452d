package handlers

import (
	"os"
	"testing"

	"github.com/authvault/authvault/testkit/testplugin"
)

// pluginPath is the test plugin (testdata/plugin), built once for the run.
var pluginPath string

func TestMain(m *testing.M) { os.Exit(testplugin.Main(m, &pluginPath)) }
