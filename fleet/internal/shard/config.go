package shard

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is one replica's part in its group: fleet.Shards with its
// defaults applied, and where the driver logs and counts.
type Config struct {
	Namespace, Group, Identity                string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	Log        logr.Logger
	Registerer prometheus.Registerer // nil: no metrics exported
	// NotOwned is what the errors of a cluster this replica does not own
	// match: fleet.ErrNotOwned.
	NotOwned error
}

// minRetryPeriod keeps the loops from spinning.
const minRetryPeriod = 10 * time.Millisecond

// clockShare is the part of a duration the clocks of two replicas may
// disagree on while measuring it: 1%.
const clockShare = 100

// Check says what is wrong with c's durations: out of order, or a budget
// that leaves the protocol less slack than a RetryPeriod.
func (c Config) Check() error {
	if c.RetryPeriod < minRetryPeriod || c.RenewDeadline <= c.RetryPeriod || c.LeaseDuration <= c.RenewDeadline {
		return fmt.Errorf("fleet: Shards needs %v ≤ RetryPeriod (%v) < RenewDeadline (%v) < LeaseDuration (%v)", minRetryPeriod, c.RetryPeriod, c.RenewDeadline, c.LeaseDuration)
	}
	if left := c.slack(); left < c.RetryPeriod {
		return fmt.Errorf("fleet: Shards' budget, LeaseDuration − RenewDeadline (%v), leaves %v for a stall and the stop of a cluster's logins once a Lease request's timeout (a quarter of it) and the clocks' 1%% are spent: at least RetryPeriod (%v) is needed; raise LeaseDuration, or lower RenewDeadline or RetryPeriod", c.LeaseDuration-c.RenewDeadline, left, c.RetryPeriod)
	}
	return nil
}

// slack is what the budget, LeaseDuration − RenewDeadline, leaves for a
// stall of the replica and the stop of its clusters' logins after a fence:
// the budget less a Lease request's timeout (a quarter of it: a renewal
// that took longer counts for nothing) and less what the clocks of two
// replicas may disagree on over the two durations (1%).
func (c Config) slack() time.Duration {
	budget := c.LeaseDuration - c.RenewDeadline
	return budget - budget/4 - (c.LeaseDuration+c.RenewDeadline)/clockShare
}
