package vault

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// epoch is where fake clocks start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// testVault is a vault on a fake clock, closed when the test ends.
func testVault(t *testing.T, opts Options) (*Vault, *testingclock.FakeClock) {
	t.Helper()
	if opts.Fallback == nil {
		opts.NoFallback = true // the machine's kubeconfig is none of a test's business
	}
	clk := testingclock.NewFakeClock(epoch)
	v := newVault(opts, clk)
	t.Cleanup(v.Close)
	return v, clk
}

// counter is a login handler that counts its calls and returns a new token
// each time, unless fail or block say otherwise.
type counter struct {
	server   string
	priority int
	lifetime time.Duration         // > 0: credentials expire this long after now()
	now      func() time.Time      // the clock for lifetime; default time.Now
	calls    atomic.Int64          // every call
	fail     atomic.Pointer[error] // when set, calls fail with it
	block    chan struct{}         // when set, calls wait for it to close
	same     atomic.Bool           // when set, every call returns token "same"
}

func (c *counter) login(ctx context.Context) (*login.ConnectionInfo, error) {
	n := c.calls.Add(1)
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := c.fail.Load(); err != nil {
		return nil, *err
	}
	server := c.server
	if server == "" {
		server = "https://api.example:6443"
	}
	info := &login.ConnectionInfo{Server: server, Token: fmt.Sprintf("token-%d", n), Priority: c.priority}
	if c.same.Load() {
		info.Token = "same"
	}
	if c.lifetime != 0 {
		now := time.Now
		if c.now != nil {
			now = c.now
		}
		info.Expiration = now().Add(c.lifetime)
	}
	return info, nil
}

func (c *counter) failWith(err error) { c.fail.Store(&err) }
func (c *counter) heal()              { c.fail.Store(nil) }

// eventually polls cond until it holds, for a hang's worth of time at
// most (testwait.Hang).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, cond)
}

// mustSelect selects, waiting a hang's worth of time at most, and fails the
// test on error.
func mustSelect(t *testing.T, v *Vault) *Credential {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	c, err := v.Select(ctx)
	if err != nil {
		t.Fatalf("Select() error: %v", err)
	}
	return c
}

// selectErr selects and returns the error, failing the test on success.
// The vault is to fail it at once: the caller's deadline is only a hang's.
func selectErr(t *testing.T, v *Vault) *LoginError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	c, err := v.Select(ctx)
	if err == nil {
		t.Fatalf("Select() = %v, want an error", c)
	}
	var le *LoginError
	if !errors.As(err, &le) {
		t.Fatalf("Select() error = %v (%T), want a *LoginError", err, err)
	}
	return le
}

// idle tells whether no login is under way.
func idle(v *Vault) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.core.loggingIn()
}

// selectAdvancing selects while it moves clk on by step every millisecond,
// so that timers on the fake clock (the login floor, the first-login wait)
// fire; it fails the test if Select fails or takes a hang's worth of time.
func selectAdvancing(t *testing.T, v *Vault, clk *testingclock.FakeClock, step time.Duration) *Credential {
	t.Helper()
	type result struct {
		c   *Credential
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
		defer cancel()
		c, err := v.Select(ctx)
		done <- result{c, err}
	}()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("Select() error: %v", r.err)
			}
			return r.c
		case <-time.After(time.Millisecond):
			clk.Step(step)
		}
	}
}

// isClosed tells whether Close has begun.
func isClosed(v *Vault) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.core.closed
}
