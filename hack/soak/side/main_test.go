package side

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/authvault/authvault/hack/soak/plugin"
	"github.com/authvault/authvault/hack/soak/wire"
)

// TestMain is the test binary in every role of the soak's: the plugin
// (the hub's and the profiles' exec plugin), a side (run as the harness
// runs it: a Config in the environment, Records on stdout until stdin
// closes, and no goroutine of Run's left once it has returned), or the
// tests, which stop their API server before the leak check.
func TestMain(m *testing.M) {
	switch role := os.Getenv(wire.RoleEnv); role {
	case wire.RolePlugin:
		os.Exit(plugin.Main())
	case wire.RoleAuthvault, wire.RoleClientGo, wire.RoleShardPeer:
		os.Exit(runSide())
	}
	code := m.Run()
	if hub != nil {
		if err := hub.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the API server:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sideLeaked is a side's exit status when goroutines of Run outlived it.
const sideLeaked = 3

// runSide is a side's process, as the soak's main runs it.
func runSide() int {
	before := goleak.IgnoreCurrent()
	cfg, err := wire.Read()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "side:", err)
		return 1
	}
	// The stdin reader above has returned: its EOF ended ctx.
	if err := goleak.Find(before); err != nil {
		fmt.Fprintln(os.Stderr, "goroutines of Run outlived it:", err)
		return sideLeaked
	}
	return 0
}

// mustJSON is v as JSON.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
