package fleet

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/authvault/authvault/fleet/internal/shard"
	"github.com/authvault/authvault/redact"
)

// Shards shares a fleet's clusters among the replicas of one program, on
// coordination.k8s.io/v1 Leases (see "Shards" in the package doc). Every
// replica sees every cluster; only the one that owns a cluster has its
// member: its OnAdd, its vault and its logins, its RESTConfig.
type Shards struct {
	// Config reaches the cluster that holds the Leases (required): the
	// hub, through a vault's config or any rest.Config. The replica needs
	// get, list, watch, create, update and delete on leases in Namespace.
	Config *rest.Config
	// Namespace is where the Leases live (required).
	Namespace string
	// Group names the replicas that share one fleet's clusters
	// (required): a DNS label of at most 40 characters, the prefix of
	// their Leases' names and the value of their group label.
	Group string
	// Identity is this replica, unique in its group. Default: the host
	// name, which is the pod's name in a Deployment or StatefulSet.
	Identity string
	// LeaseDuration is how long a replica that stopped renewing its Lease
	// keeps its clusters, as its peers see it: they take them after that
	// long without seeing it renewed. Default: 15 s.
	LeaseDuration time.Duration
	// RenewDeadline is how long a replica keeps its clusters without
	// renewing its Lease: then it gives every one up, before its peers
	// may take them. LeaseDuration − RenewDeadline is the budget the
	// package doc's "Shards" spends: New refuses one that leaves less
	// than RetryPeriod once a quarter of it and 1% of both durations are
	// spent. Default: 10 s.
	RenewDeadline time.Duration
	// RetryPeriod is how often a replica renews its Lease, and how soon
	// it tries again after a failed renewal. Default: 2 s.
	RetryPeriod time.Duration
}

// The defaults of Shards, as client-go's leader election's.
const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
)

// groupMax leaves room in a Lease's name for the hash of the identity.
const groupMax = 40

// withDefaults returns sh with its defaults, or what is wrong with it.
func (sh Shards) withDefaults() (Shards, error) {
	switch {
	case sh.Config == nil:
		return sh, errors.New("fleet: Shards.Config is required: the cluster that holds the Leases")
	case sh.Namespace == "":
		return sh, errors.New("fleet: Shards.Namespace is required: where the Leases live")
	case sh.Group == "":
		return sh, errors.New("fleet: Shards.Group is required: it names the replicas that share the clusters")
	}
	if errs := validation.IsDNS1123Label(sh.Group); len(errs) > 0 || len(sh.Group) > groupMax {
		return sh, fmt.Errorf("fleet: Shards.Group %q must be a DNS label of at most %d characters", sh.Group, groupMax)
	}
	if sh.Identity == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return sh, fmt.Errorf("fleet: Shards.Identity is empty and the host name cannot stand for it: %v", err)
		}
		sh.Identity = host
	}
	if sh.LeaseDuration == 0 {
		sh.LeaseDuration = defaultLeaseDuration
	}
	if sh.RenewDeadline == 0 {
		sh.RenewDeadline = defaultRenewDeadline
	}
	if sh.RetryPeriod == 0 {
		sh.RetryPeriod = defaultRetryPeriod
	}
	return sh, sh.config(logr.Discard(), nil).Check()
}

// config is sh, its defaults applied, as the shards' driver takes it.
func (sh Shards) config(log logr.Logger, reg prometheus.Registerer) shard.Config {
	return shard.Config{
		Namespace: sh.Namespace, Group: sh.Group, Identity: sh.Identity,
		LeaseDuration: sh.LeaseDuration, RenewDeadline: sh.RenewDeadline, RetryPeriod: sh.RetryPeriod,
		Log: log, Registerer: reg, NotOwned: ErrNotOwned,
	}
}

// startShards starts f's part in sh's group: it panics, as New says, when
// sh is invalid.
func startShards(f *Fleet, sh Shards) *shard.Driver {
	sh, err := sh.withDefaults()
	if err != nil {
		panic(err)
	}
	client, err := coordinationv1client.NewForConfig(sh.Config)
	if err != nil {
		panic(fmt.Errorf("fleet: Shards.Config: %w", redact.Error(err)))
	}
	d := shard.New(sh.config(f.opts.Logger, f.opts.Registerer), client.Leases(sh.Namespace), shardHost{f}, clock.RealClock{})
	d.Start()
	return d
}

// ErrNotOwned means another replica of the fleet's group owns the cluster,
// or none does yet: the cause of a member's context when its cluster moves
// to another replica or this one loses its Lease, and the error of
// RESTConfig for a cluster this replica does not own.
var ErrNotOwned = errors.New("fleet: this replica does not own the cluster")
