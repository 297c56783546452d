package report

import (
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// Run is one soak run, as the harness recorded it.
type Run struct {
	Start time.Time
	// Settled is when the faults began: the sides had joined every
	// cluster and run their workload a while. The baseline is read over
	// the Window before it, the end over the Window before End.
	Settled time.Time
	// Window is how long a baseline or an end is read over. Default:
	// DefaultWindow.
	Window time.Duration
	// FaultsEnd is when the last fault ended; the run then goes on,
	// quiet, until End.
	FaultsEnd time.Time
	End       time.Time
	Faults    []Fault
	// Sides by role (wire.RoleAuthvault, wire.RoleClientGo).
	Sides map[string]*Side
	// Clusters is how many fleet clusters the hub serves.
	Clusters int
	// Shared are the roles whose fleets share the clusters among them
	// (fleet.Shards): together, not each, they reach every cluster.
	Shared []string `json:",omitempty"`
}

// Side is what one side reported, and what the harness saw of it.
type Side struct {
	Role     string
	Samples  []wire.Sample
	Failures []wire.Failure
	// PluginRuns counts runs of the side's exec plugin (its token
	// endpoint's hits).
	PluginRuns int64
	// PredictedLogins is how many logins the tokens' lives call for over
	// the run: each credential source's run length over its token's life.
	PredictedLogins float64
	// Leaked lists what of the side's output (its records and its log
	// file) held a secret the harness issued: where, never the secret.
	Leaked []string
}

// Fault is one fault the harness caused.
type Fault struct {
	Kind       string // "revocation", "secret-recreate", "ca-rotation", "plugin-failing", "plugin-hanging", "apiserver-restart", "issuer-change", "partition", "replica-restart"
	Start, End time.Time
	// Scope is what it may break: "all", "hub" (the hub's own
	// credentials: the workload, watch, exec, operator, addon),
	// "namespace:<namespace>" (every fleet cluster of that namespace: the
	// ClusterProfiles', which use the plugin), "cluster:<name>" (one
	// fleet cluster, as the fleet names it: "<namespace>/<name>"), or
	// "fleet" (a replica of a shared fleet killed: it explains clusters
	// that no replica owned, and nothing else).
	Scope string
	// Grace is how long after End a failure still counts as the fault's:
	// a revoked token is rejected up to the API server's review cache
	// later, a client-go token fetched just before a fault still expires
	// inside it.
	Grace time.Duration
}
