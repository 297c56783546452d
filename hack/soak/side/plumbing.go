package side

import (
	"context"
	"maps"
	"net/http"
	"slices"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// plumbing is what a side's workload runs on: the one part of a side
// that differs between authvault's and client-go's.
type plumbing struct {
	// hub reaches the hub for the workload, the operator, the fleet's
	// watches and the addon's reviews.
	hub *rest.Config
	// fleet is the clusters the side has.
	fleet fleetView
	// front puts the side's check of the addon's callers in front of the
	// addon's upstream.
	front func(upstream http.Handler) (http.Handler, error)
	// audiences are what the addon callers' tokens are requested for
	// (none: the API server's own).
	audiences []string
	// authorize is whether the callers need RBAC to get the addon's path
	// (the side's front asks a SubjectAccessReview).
	authorize bool
	// countLogins is whether Samples count the vaults' logins.
	countLogins bool
	// owned lists the clusters the fleet owns now, when it shares them
	// with other replicas; nil otherwise.
	owned func() []string

	// run keeps the fleet in step with the hub until ctx ends.
	run func(ctx context.Context)
	// close ends what the plumbing holds, once run has returned and the
	// workload has stopped.
	close func()
}

// fleetView is the fleet as the workload sees it.
type fleetView interface {
	// names are the clusters the side has now.
	names() []string
	// client reaches the named cluster; errNoCluster when the side does
	// not have it now.
	client(ctx context.Context, name string) (kubernetes.Interface, error)
	// moved says whether another replica of a sharded fleet owns the
	// cluster now: not this side's to read, and no failure.
	moved(name string) bool
}

// pluginEnv is a Config's plugin environment, as an exec config lists it:
// sorted, so that a config is the same every time it is built.
func pluginEnv(env map[string]string) []clientcmdapi.ExecEnvVar {
	out := make([]clientcmdapi.ExecEnvVar, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, clientcmdapi.ExecEnvVar{Name: k, Value: env[k]})
	}
	return out
}

// execAPIVersion is the version of the hub's plugin's ExecCredential.
const execAPIVersion = "client.authentication.k8s.io/v1"
