package shard

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Every configuration the tests and the model run passes the check that
// fleet.New makes: what they prove holds for configurations a user may give.
func TestTheTestsConfigsAreValid(t *testing.T) {
	for _, c := range append([]Config{shortShards, quickShards, slowShards}, modelConfigs...) {
		if err := c.Check(); err != nil {
			t.Errorf("%v/%v/%v: %v", c.LeaseDuration, c.RenewDeadline, c.RetryPeriod, err)
		}
	}
}

func TestCheckRefusesABudgetBelowRetryPeriod(t *testing.T) {
	c := Config{LeaseDuration: 1000 * time.Millisecond, RenewDeadline: 900 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
	err := c.Check()
	if err == nil || !strings.Contains(err.Error(), "at least RetryPeriod (100ms) is needed") {
		t.Errorf("Check() = %v, want the budget's error", err)
	}
}

// A driver without the error its not-owned errors match would hand out
// errors that match nothing: New refuses it.
func TestNewRequiresNotOwned(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Config.NotOwned is required") {
			t.Errorf("New without NotOwned: recovered %v", r)
		}
	}()
	New(shortShards, nil, &fakeHost{t: t}, nil)
}
