// Package testplugin builds the credential plugin the tests run
// (handlers/testdata/plugin), for the packages whose tests need it.
package testplugin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// Build compiles the plugin into a new temporary directory and returns the
// binary's path and a function that removes it. It finds the source with
// the go command, so the working directory (a test's: its package's) must
// be inside a module that holds or requires authvault's root.
func Build() (path string, cleanup func(), err error) {
	// The root module's directory, from the go command: make test builds
	// with -trimpath, which leaves runtime.Caller an import path, not a
	// place on disk.
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/authvault/authvault")
	var stderr strings.Builder
	list.Stderr = &stderr
	root, err := list.Output()
	if err != nil {
		return "", nil, fmt.Errorf("testplugin: finding the authvault module: %w\n%s", err, stderr.String())
	}
	source := filepath.Join(strings.TrimSpace(string(root)), "handlers", "testdata", "plugin")
	dir, err := os.MkdirTemp("", "authvault-plugin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, "plugin")
	build := exec.Command("go", "build", "-o", path, ".")
	build.Dir = source
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("testplugin: building %s: %w\n%s", source, err, out)
	}
	return path, cleanup, nil
}

// Main is a TestMain body for packages whose tests run the plugin: it builds
// it into *path, runs the tests, removes it, and fails the run on leaked
// goroutines.
func Main(m *testing.M, path *string) int {
	p, cleanup, err := Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*path = p
	code := m.Run()
	cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
