package vault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// Point 6: a failed login is a LoginError naming the handler that failed
// (and counting those that gave nothing); its Handlers hold every outcome;
// further logins are spaced by bounded exponential backoff; healing is
// picked up.
func TestFailedLoginBacksOffAndHeals(t *testing.T) {
	v, clk := testVault(t, Options{})
	boom := errors.New("secret store unreachable")
	broken, empty := &counter{}, &counter{}
	broken.failWith(boom)
	v.OnLogin(broken.login, login.ID("broken"), login.Retries(0), login.Backoff(time.Second, 4*time.Second))
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		_, _ = empty.login(ctx)
		return nil, nil
	}, login.ID("empty"))

	le := selectErr(t, v)
	if !errors.Is(le, boom) || !errors.Is(le, errNoCredential) {
		t.Errorf("LoginError = %v, want it to wrap %v and errNoCredential", le, boom)
	}
	for _, want := range []string{`handler "broken": secret store unreachable`, `1 other handler gave nothing`} {
		if !strings.Contains(le.Error(), want) {
			t.Errorf("LoginError = %q, want it to contain %q", le, want)
		}
	}
	if len(le.Handlers) != 2 || le.Handlers[0].Handler != "broken" || le.Handlers[0].Running {
		t.Fatalf("Handlers = %+v, want broken then empty, finished", le.Handlers)
	}

	// Within the backoff: an immediate error, and no login.
	retryAt := le.Handlers[0].RetryAt
	assertBetween(t, "first backoff", retryAt.Sub(clk.Now()), time.Second, 1200*time.Millisecond)
	selectErr(t, v)
	if broken.calls.Load() != 1 || empty.calls.Load() != 1 {
		t.Fatalf("calls = %d, %d during backoff, want 1, 1", broken.calls.Load(), empty.calls.Load())
	}

	// The backoff doubles, up to its bound.
	wants := []time.Duration{2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	for i, want := range wants {
		clk.SetTime(retryAt)
		le = selectErr(t, v)
		if got := broken.calls.Load(); got != int64(i+2) {
			t.Fatalf("calls = %d, want %d", got, i+2)
		}
		retryAt = le.Handlers[0].RetryAt
		assertBetween(t, "backoff", retryAt.Sub(clk.Now()), want, want*6/5)
	}

	broken.heal()
	clk.SetTime(retryAt)
	if c := mustSelect(t, v); c.Handler != "broken" {
		t.Errorf("Select() after healing = %v, want broken's credential", c)
	}
}

func assertBetween(t *testing.T, what string, got, lo, hi time.Duration) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s = %v, want between %v and %v", what, got, lo, hi)
	}
}

// A caller never waits past its own context, even while a handler retries
// without end; the handler heals without a restart.
func TestCallerDeadlineWhileRetrying(t *testing.T) {
	v, clk := testVault(t, Options{})
	boom := errors.New("plugin exited 1")
	h := &counter{}
	h.failWith(boom)
	v.OnLogin(h.login, login.ID("flaky")) // unlimited retries

	// The caller checked comes once the first attempt has failed (a first
	// caller starts the round and leaves), so that its error carries the
	// handler's, however long the attempt took on this machine.
	first, stopFirst := context.WithCancel(context.Background())
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		_, _ = v.Select(first)
	}()
	eventually(t, "the first attempt to fail", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.core.lookup("flaky").outcome != nil
	})
	stopFirst()
	<-firstDone

	// The retries wait on the fake clock, which stands still: a Select
	// that waited for them rather than for its deadline would not return.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := v.Select(ctx)
	if elapsed := time.Since(start); elapsed > testwait.Hang {
		t.Errorf("Select() returned after %v, want about its 50ms deadline", elapsed)
	}
	var le *LoginError
	if !errors.As(err, &le) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, boom) {
		t.Fatalf("Select() error = %v, want a LoginError with the deadline and %v", err, boom)
	}
	if !le.Handlers[0].Running || !strings.Contains(le.Error(), "is still retrying after: plugin exited 1") {
		t.Errorf("LoginError = %v, want the handler shown as still retrying", le)
	}

	h.heal()
	done := make(chan *Credential)
	go func() { done <- mustSelect(t, v) }()
	// The caller's MaxWait timer, and the retry's.
	eventually(t, "the retry timer", func() bool { return clk.Waiters() == 2 })
	clk.Step(2 * time.Second) // past the first retry's backoff (1 s, jitter 20%), within MaxWait
	if c := <-done; c.Handler != "flaky" {
		t.Errorf("Select() = %v, want the healed handler's credential", c)
	}
}

func TestTemporaryDelayIsHonoured(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{}
	h.failWith(login.Temporary(errors.New("throttled"), 42*time.Second))
	v.OnLogin(h.login, login.Retries(0))
	le := selectErr(t, v)
	if got := le.Handlers[0].RetryAt.Sub(clk.Now()); got != 42*time.Second {
		t.Errorf("retry in %v, want the 42s the handler asked for", got)
	}
}

func TestPermanentStopsRetries(t *testing.T) {
	v, _ := testVault(t, Options{})
	h := &counter{}
	h.failWith(login.Permanent(errors.New("forbidden")))
	v.OnLogin(h.login) // unlimited retries, but the error is permanent
	le := selectErr(t, v)
	var pe *login.PermanentError
	if !errors.As(le, &pe) || h.calls.Load() != 1 {
		t.Errorf("LoginError = %v after %d calls, want a permanent error after 1", le, h.calls.Load())
	}
}

func TestRetriesAreCounted(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{}
	h.failWith(errors.New("nope"))
	v.OnLogin(h.login, login.Retries(2), login.Backoff(time.Millisecond, time.Millisecond))
	done := make(chan error)
	go func() {
		_, err := v.Select(context.Background())
		done <- err
	}()
	for range 2 {
		// The caller's MaxWait timer, and the retry's.
		eventually(t, "a retry timer", func() bool { return clk.Waiters() == 2 })
		clk.Step(time.Second)
	}
	if err := <-done; err == nil || h.calls.Load() != 3 {
		t.Errorf("Select() = %v after %d calls, want an error after 3", err, h.calls.Load())
	}
}

// A handler that panics, one that hangs past its timeout and one that
// returns garbage fail their attempts; a good handler keeps the vault working.
func TestBadHandlersDoNotTakeTheVaultDown(t *testing.T) {
	v, clk := testVault(t, Options{})
	release := make(chan struct{})
	defer close(release)
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { panic("nil map") }, login.ID("panics"), login.Retries(0))
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		<-release // ignores its context
		return nil, nil
	}, login.ID("hangs"), login.Retries(0), login.Timeout(20*time.Millisecond))
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: "::garbage::", Token: "t"}, nil
	}, login.ID("garbage"), login.Retries(0))

	le := selectErr(t, v)
	var pe *login.PanicError
	if !errors.As(le, &pe) || !errors.Is(le, login.ErrAbandoned) || !strings.Contains(le.Error(), "invalid ConnectionInfo") {
		t.Errorf("LoginError = %v, want a panic, an abandoned attempt and a validation error", le)
	}

	good := &counter{}
	v.OnLogin(good.login, login.ID("good"))
	v.mu.Lock()
	for _, h := range v.core.handlers {
		h.retryAt = time.Time{}
	}
	v.mu.Unlock()
	// The bad ones run again (past their login floor; "hangs" is not called
	// while its abandoned call runs), and hold the good credential back no
	// longer than the first-login wait.
	if c := selectAdvancing(t, v, clk, 100*time.Millisecond); c.Handler != "good" {
		t.Errorf("Select() = %v, want the good handler's credential", c)
	}
}

// Credentials that live 20 ms, and no caller: the login floor and the
// refresh backoff keep the handler from logging in in a loop.
func TestShortLivedCredentialsCauseNoLoginStorm(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []login.Option
		maxCalls int64
	}{
		// The default floor (1 s) is longer than the credentials live:
		// the first login, and refreshes 1, 2, 4 s apart: one in 0.5 s.
		{"default options", nil, 2},
		// A 50-ms floor is longer too: 50 logins a second without the
		// refresh backoff, which doubles to 400 ms: at most 5 in 0.5 s.
		{"50ms floor", []login.Option{login.Backoff(50*time.Millisecond, 400*time.Millisecond)}, 5},
		// A 10-ms floor is shorter than the credentials live: they are
		// refreshed at the floor, which the handler's options chose.
		{"10ms floor", []login.Option{login.Backoff(10*time.Millisecond, 80*time.Millisecond)}, 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := New(Options{NoFallback: true})
			defer v.Close()
			h := &counter{lifetime: 20 * time.Millisecond}
			v.OnLogin(h.login, tc.opts...)
			mustSelect(t, v)
			time.Sleep(500 * time.Millisecond)
			if got := h.calls.Load(); got > tc.maxCalls {
				t.Errorf("%d logins in half a second with no caller, want at most %d", got, tc.maxCalls)
			}
		})
	}
}

// A refresh that returns a credential already inside its refresh window
// is not followed by another at once: the next refresh backs off, further
// each time.
func TestRefreshInsideItsWindowBacksOff(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{lifetime: 50 * time.Millisecond, now: clk.Now}
	v.OnLogin(h.login, login.Backoff(time.Second, 8*time.Second), login.ID("h"))
	installed := mustSelect(t, v)
	// Refreshes come 1, 2, 4, 8, 8 s apart, up to a fifth later (the
	// backoff's jitter): stepping by just under each finds no new call;
	// stepping past its jitter finds exactly one.
	for i, gap := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		// The next refresh is armed when its credential is installed, on
		// the fake clock's time then: wait for it before stepping, or a
		// loaded machine arms it after the step, one gap late.
		eventually(t, fmt.Sprintf("credential %d installed", i+1), func() bool { return current(v, "h") != installed || i == 0 })
		installed = current(v, "h")
		before := h.calls.Load()
		clk.Step(gap - 10*time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		if got := h.calls.Load(); got != before {
			t.Fatalf("refresh %d came before its backoff of %v", i+1, gap)
		}
		clk.Step(gap/5 + 10*time.Millisecond)
		eventually(t, fmt.Sprintf("refresh %d", i+1), func() bool { return h.calls.Load() == before+1 })
	}
}

// A handler that ignores its context is never called while its abandoned
// call still runs; waiting callers get a LoginError rather than wait for
// it; the metric and the log show the abandoned call; once it returns, the
// handler serves again.
func TestAbandonedCallIsNeverRunConcurrently(t *testing.T) {
	synctest.Test(t, testAbandonedCallIsNeverRunConcurrently)
}

// testAbandonedCallIsNeverRunConcurrently is its body, in a synctest
// bubble: each caller below waits 100 ms for the 20-ms attempt to be
// abandoned, an order a busy machine could swap on a real clock (the
// caller's deadline first, and an error without ErrAbandoned).
func testAbandonedCallIsNeverRunConcurrently(t *testing.T) {
	var logs testlog.Buffer
	reg := prometheus.NewRegistry()
	v := New(Options{NoFallback: true, Logger: logs.Logger(0), Registerer: reg})
	defer v.Close()
	release := make(chan struct{})
	var running, most, calls atomic.Int32
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		n := running.Add(1)
		defer running.Add(-1)
		calls.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release // ignores its context
		return &login.ConnectionInfo{Server: "https://a", Token: "t"}, nil
	}, login.ID("stuck"), login.Timeout(20*time.Millisecond), login.Backoff(10*time.Millisecond, 20*time.Millisecond))

	deadline := time.Now().Add(700 * time.Millisecond)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := v.Select(ctx)
		cancel()
		if !errors.Is(err, login.ErrAbandoned) {
			t.Fatalf("Select() error = %v, want the abandoned call named", err)
		}
		time.Sleep(10 * time.Millisecond) // a caller every 10 ms: the bubble's time moves only while all wait
	}
	if got := most.Load(); got != 1 {
		t.Errorf("%d calls of the handler ran at once, want 1", got)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("handler called %d times while its first call had not returned, want 1", got)
	}
	if got := abandonedCalls(t, reg, "stuck"); got != 1 {
		t.Errorf("authvault_abandoned_calls{handler=stuck} = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "abandoned call") {
		t.Errorf("log does not mention the abandoned call:\n%s", logs.String())
	}

	close(release)
	eventually(t, "the handler to serve again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := v.Select(ctx)
		return err == nil
	})
	if got := abandonedCalls(t, reg, "stuck"); got != 0 {
		t.Errorf("authvault_abandoned_calls{handler=stuck} = %v after the call returned, want 0", got)
	}
}

func abandonedCalls(t *testing.T, reg *prometheus.Registry, handler string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "authvault_abandoned_calls" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "handler" && l.GetValue() == handler {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no authvault_abandoned_calls for %s", handler)
	return 0
}
