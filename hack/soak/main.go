// Command soak runs a night in an hour: one process with everything of
// authvault's (a vault whose handlers are a slow exec plugin and a token
// file, a fleet of 50 clusters from kubeconfig Secrets and ClusterProfiles,
// addonauth with its callers, a controller-runtime manager with leader
// election), and beside it the same workload through plain client-go,
// against an embedded kube-apiserver, while faults come on a schedule.
package main

import (
	"fmt"
	"os"

	"github.com/authvault/authvault/hack/soak/plugin"
	"github.com/authvault/authvault/hack/soak/wire"
)

func main() {
	switch role := os.Getenv(wire.RoleEnv); role {
	case "":
		fmt.Fprintln(os.Stderr, "soak: harness not written yet")
		os.Exit(1)
	case wire.RolePlugin:
		os.Exit(plugin.Main())
	default:
		fmt.Fprintf(os.Stderr, "soak: unknown %s %q\n", wire.RoleEnv, role)
		os.Exit(2)
	}
}
