// Package wire is what the soak's harness and its sides say to each other:
// the harness starts each side as a process of its own (the soak's binary,
// with SOAK_ROLE set) and hands it a Config as JSON in SOAK_CONFIG; the side
// writes Records, one JSON object per line, on its standard output until its
// standard input closes, then exits.
package wire

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// The roles the soak's binary plays, from SOAK_ROLE (empty: the harness).
const (
	RoleEnv = "SOAK_ROLE"

	RoleAuthvault = "authvault" // a side: everything through authvault
	RoleClientGo  = "client-go" // a side: the same, the way controllers do it today
	RolePlugin    = "plugin"    // a run of the exec credential plugin
	// RoleShardPeer is a second replica of the authvault side's fleet, and
	// only its fleet: the two share the clusters on Leases (fleet.Shards),
	// and the harness kills it (kill -9) and starts it again as a fault.
	RoleShardPeer = "shard-peer"

	ConfigEnv = "SOAK_CONFIG" // a side's Config, as JSON

	// PluginURLEnv is where a run of the plugin fetches its token: the
	// side's token endpoint, served by the harness.
	PluginURLEnv = "SOAK_PLUGIN_URL"
)

// Config is what a side needs to know. Every path and name is the harness's
// to change during the run (a rewrite of the token file or the CA file is a
// fault); the side only reads them.
type Config struct {
	Side string // RoleAuthvault or RoleClientGo

	Server string // the API server's URL
	// CAFile holds the API server's serving CA, rewritten by the harness
	// when it rotates the CA.
	CAFile string
	// TokenFile holds a token for the hub, rewritten by the harness before
	// it expires (authvault's second handler on the hub; client-go's side
	// does not read it).
	TokenFile string
	// Plugin is the hub's exec credential plugin: the soak's binary as
	// RolePlugin, fetching from the side's token endpoint (its env says
	// where).
	PluginCommand string
	PluginEnv     map[string]string

	// Namespace is the side's own on the hub: its workload's ConfigMaps,
	// its operator's lease and ConfigMaps, its addon callers'
	// ServiceAccounts.
	Namespace string
	// Pod is a Pod in Namespace that no node runs: an exec on it is
	// answered "does not have a host assigned" once authenticated, which
	// is the exec stream's success.
	Pod string

	// SecretsNamespace holds the fleet's kubeconfig Secrets, Cluster API's
	// <cluster>-kubeconfig (key "value"); ProfilesNamespace its
	// ClusterProfiles, served by ProviderFile's providers (KEP-5339).
	SecretsNamespace  string
	ProfilesNamespace string
	ProviderFile      string

	// AddonAudience is the audience addonauth verifies and the callers'
	// tokens are requested for.
	AddonAudience string

	// Workers run the hub's create/update/list/delete loop.
	Workers int
	// SampleEvery is how often the side writes a Sample.
	SampleEvery time.Duration
	// ShardGroup, when set, has the side's fleet share its clusters with
	// the other replicas of the group (fleet.Shards), on Leases in
	// ShardNamespace: a cluster another replica owns is not this side's
	// to read.
	ShardGroup, ShardNamespace string
	// FleetOnly runs the fleet's reads alone: no workload on the hub, no
	// operator, no addon (the shard peer, which is only a fleet replica).
	FleetOnly bool

	// LogFile receives the side's logs at the default level (the vault's,
	// the fleet's, controller-runtime's, klog's); LogLines counts them.
	LogFile string
}

// Read is the side's Config from SOAK_CONFIG.
func Read() (Config, error) {
	var c Config
	raw := os.Getenv(ConfigEnv)
	if raw == "" {
		return c, fmt.Errorf("soak: %s is not set", ConfigEnv)
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return c, fmt.Errorf("soak: %s: %w", ConfigEnv, err)
	}
	return c, nil
}

// Record is one line of a side's output: a Sample or a Failure.
type Record struct {
	Sample  *Sample  `json:"sample,omitempty"`
	Failure *Failure `json:"failure,omitempty"`
}

// Sample is the side's process as it is at At; counters are cumulative
// since the side started.
type Sample struct {
	At         time.Time `json:"at"`
	HeapInUse  uint64    `json:"heapInUse"`  // bytes, runtime.MemStats.HeapInuse
	Goroutines int       `json:"goroutines"` // runtime.NumGoroutine
	FDs        int       `json:"fds"`        // entries of /proc/self/fd
	Conns      int       `json:"conns"`      // TCP connections of the process, established (/proc/self/net/tcp{,6} by the inodes of its sockets)
	Series     int       `json:"series"`     // Prometheus series in controller-runtime's registry
	LogLines   int64     `json:"logLines"`   // lines written to LogFile
	Logins     int64     `json:"logins"`     // logins the side made (authvault: its logins metric; client-go: 0, the harness counts plugin runs)
	Requests   int64     `json:"requests"`   // caller operations that succeeded
	// Successes are Requests by component ("hub", "watch", "exec",
	// "addon", "fleet"): an exec stream's success is the API server's
	// answer that the Pod has no host.
	Successes map[string]int64 `json:"successes,omitempty"`
	Clusters  int              `json:"clusters"` // fleet clusters the side can reach now
	// Owned are the clusters the side's fleet owns now, sorted, when it
	// shares them with other replicas (Config.ShardGroup): the report
	// checks that the replicas together own each cluster, and never two
	// of them one.
	Owned      []string `json:"owned,omitempty"`
	Reconciled int64    `json:"reconciled"` // the operator's reconciles
}

// Failure is one operation a caller saw fail.
type Failure struct {
	At time.Time `json:"at"`
	// Component is what failed: "hub" (the CRUD workload), "watch", "exec",
	// "operator", "addon", or "fleet".
	Component string `json:"component"`
	// Cluster is the fleet cluster, for Component "fleet".
	Cluster string `json:"cluster,omitempty"`
	// Kind classifies the error: "unauthorized", "forbidden",
	// "refused" (connection refused or reset), "tls", "timeout",
	// "no-cluster" (the fleet does not have it now), "server" (5xx), "other";
	// and two the report finds in the samples of replicas that share a
	// fleet: "unowned" (no replica owned the cluster) and "two-owners".
	Kind    string `json:"kind"`
	Message string `json:"message"` // the error, as the caller got it: never a secret
}
