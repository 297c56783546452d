package addonauth

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// backendRetry is how long a failing API server is left alone after a
// failed call before one call finds out whether it is back: short, since
// new callers get 503 meanwhile, and as long as the Retry-After of that 503.
const backendRetry = time.Second

// errBackendFailing: the last call to the API server failed a moment ago,
// and this one was not sent.
var errBackendFailing = errors.New("addonauth: the API server failed a moment ago, not asked again yet")

// circuit remembers that calls to the API server fail, so that a hung
// server costs one caller its timeout rather than every caller: after a
// failure, calls fail at once for the retry period; then one call at a
// time goes through (a probe), and the first that succeeds ends the
// outage. It logs an outage once when it starts and once when it ends.
// A zero circuit is not valid; make one with newCircuit.
type circuit struct {
	what  string // the calls, for the log
	retry time.Duration
	now   func() time.Time
	log   logr.Logger

	mu      sync.Mutex // guards the fields below
	failing bool       // the last call that ended failed
	since   time.Time  // of the outage's first failure
	retryAt time.Time  // no call goes through before, while failing
	probing bool       // a probe is in flight
	lastErr error      // of the last failure
}

func newCircuit(what string, now func() time.Time, log logr.Logger) *circuit {
	return &circuit{what: what, retry: backendRetry, now: now, log: log}
}

// enter tells whether a call may go to the API server now. When it may,
// done must be called with the call's outcome; when not, the error wraps
// errBackendFailing and the last failure. blames says whether the call's
// failure is the API server's: not when it may be the call's own (a
// review of a token of the caller's choosing, which the API server asks
// a webhook about), or a caller could open the circuit for everyone.
func (c *circuit) enter(blames bool) (done func(error), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.failing {
		return func(err error) { c.exit(false, blames, err) }, nil
	}
	if c.probing || c.now().Before(c.retryAt) {
		return nil, fmt.Errorf("%w: %w", errBackendFailing, c.lastErr)
	}
	c.probing = true // for holding too
	return func(err error) { c.exit(true, blames, err) }, nil
}

// holding is enter's error without entering: a caller that would wait
// for another's call (a probe of the same token's) asks first.
func (c *circuit) holding() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing && (c.probing || c.now().Before(c.retryAt)) {
		return fmt.Errorf("%w: %w", errBackendFailing, c.lastErr)
	}
	return nil
}

// exit records a call's outcome. A call that began before an outage may
// end in it: its success ends the outage as a probe's does.
func (c *circuit) exit(probe, blames bool, err error) {
	c.mu.Lock()
	if probe {
		c.probing = false
	}
	now := c.now()
	began, ended := false, false
	var down time.Duration
	switch {
	case err == nil && c.failing:
		c.failing, ended, down = false, true, now.Sub(c.since)
	case err == nil, !blames:
	default:
		if !c.failing {
			c.failing, c.since, began = true, now, true
		}
		c.retryAt, c.lastErr = now.Add(c.retry), err
	}
	c.mu.Unlock()
	// Info, not Error: logr's Error makes zap print a stack trace, which
	// says nothing here. The error names no token: the token goes in a
	// request's body, never its URL.
	switch {
	case began:
		c.log.Info("the API server fails "+c.what+": callers verified recently are served (Options.StaleIfError), others get 503; one call at a time finds out when it is back",
			"error", err.Error(), "retryEvery", c.retry)
	case ended:
		c.log.Info("the API server answers "+c.what+" again", "after", down.Round(time.Millisecond))
	}
}
