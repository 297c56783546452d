package fleet

import (
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
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

// minRetryPeriod keeps the loops from spinning.
const minRetryPeriod = 10 * time.Millisecond

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
	if sh.RetryPeriod < minRetryPeriod || sh.RenewDeadline <= sh.RetryPeriod || sh.LeaseDuration <= sh.RenewDeadline {
		return sh, fmt.Errorf("fleet: Shards needs %v ≤ RetryPeriod (%v) < RenewDeadline (%v) < LeaseDuration (%v)", minRetryPeriod, sh.RetryPeriod, sh.RenewDeadline, sh.LeaseDuration)
	}
	if left := sh.slack(); left < sh.RetryPeriod {
		return sh, fmt.Errorf("fleet: Shards' budget, LeaseDuration − RenewDeadline (%v), leaves %v for a stall and the stop of a cluster's logins once a Lease request's timeout (a quarter of it) and the clocks' 1%% are spent: at least RetryPeriod (%v) is needed; raise LeaseDuration, or lower RenewDeadline or RetryPeriod", sh.LeaseDuration-sh.RenewDeadline, left, sh.RetryPeriod)
	}
	return sh, nil
}

// slack is what the budget, LeaseDuration − RenewDeadline, leaves for a
// stall of the replica and the stop of its clusters' logins after a fence:
// the budget less a Lease request's timeout (a quarter of it: a renewal
// that took longer counts for nothing) and less what the clocks of two
// replicas may disagree on over the two durations (1%).
func (sh Shards) slack() time.Duration {
	budget := sh.LeaseDuration - sh.RenewDeadline
	return budget - budget/4 - (sh.LeaseDuration+sh.RenewDeadline)/clockShare
}

// ErrNotOwned means another replica of the fleet's group owns the cluster,
// or none does yet: the cause of a member's context when its cluster moves
// to another replica or this one loses its Lease, and the error of
// RESTConfig for a cluster this replica does not own.
var ErrNotOwned = errors.New("fleet: this replica does not own the cluster")

// notOwnedError says which replica owns a cluster, or why this one gave
// it up. It is an ErrNotOwned.
type notOwnedError struct {
	name, self, owner string
	why               string // when the cluster left this replica
}

func (e *notOwnedError) Error() string {
	switch {
	case e.why != "":
		return fmt.Sprintf("fleet: replica %q gave cluster %q up: %s", e.self, e.name, e.why)
	case e.owner == "":
		return fmt.Sprintf("fleet: cluster %q is owned by no replica yet (this is %q)", e.name, e.self)
	case e.owner == e.self:
		return fmt.Sprintf("fleet: cluster %q is this replica's (%q) once its previous owner has let it go", e.name, e.self)
	}
	return fmt.Sprintf("fleet: cluster %q is owned by replica %q, not this one (%q)", e.name, e.owner, e.self)
}

func (e *notOwnedError) Unwrap() error { return ErrNotOwned }
