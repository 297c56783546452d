// Command soak runs a night in an hour: one process with everything of
// authvault's (a vault whose handlers are a slow exec plugin and a token
// file, a fleet of 50 clusters from kubeconfig Secrets and ClusterProfiles,
// addonauth with its callers, a controller-runtime manager with leader
// election), and beside it the same workload through plain client-go, each
// a process of its own, against an embedded kube-apiserver, while faults
// come on a schedule; then it reports what callers saw and how each
// process's resources moved, draws them, and fails when the authvault side
// had a failure no fault explains, leaked a secret, or did not come back
// to its baseline (and, in a long run, grew).
//
//	make soak                         # 60 min of faults: SOAK_DURATION=60m
//	make soak SOAK_DURATION=2m        # what make test runs
//
// The same binary is each side (SOAK_ROLE=authvault, client-go) and their
// exec credential plugin (SOAK_ROLE=plugin).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/authvault/authvault/hack/soak/plugin"
	"github.com/authvault/authvault/hack/soak/wire"
)

func main() {
	switch role := os.Getenv(wire.RoleEnv); role {
	case "":
		os.Exit(harnessMain())
	case wire.RolePlugin:
		os.Exit(plugin.Main())
	case wire.RoleAuthvault, wire.RoleClientGo, wire.RoleShardPeer:
		os.Exit(sideMain())
	default:
		fmt.Fprintf(os.Stderr, "soak: unknown %s %q\n", wire.RoleEnv, role)
		os.Exit(2)
	}
}

func harnessMain() int {
	// The harness's output is its progress and report: the envtest and
	// client-go packages it links log nothing of their own.
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	var o options
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	o.register(fs)
	_ = fs.Parse(os.Args[1:])
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := harness(ctx, &o); err != nil {
		fmt.Fprintln(os.Stderr, "\nsoak: FAILED:\n"+err.Error())
		return 1
	}
	fmt.Println("\nsoak: passed")
	return 0
}

// sideMain runs a side until its standard input closes (the harness is
// done with it, or gone).
func sideMain() int {
	cfg, err := wire.Read()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := runSide(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "soak %s: %v\n", cfg.Side, err)
		return 1
	}
	return 0
}
