package vault

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
)

// Point 6: a failed login is a LoginError naming every handler; further
// logins are spaced by bounded exponential backoff; healing is picked up.
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
	if !errors.Is(le, boom) || !errors.Is(le, ErrNoCredential) {
		t.Errorf("LoginError = %v, want it to wrap %v and ErrNoCredential", le, boom)
	}
	for _, want := range []string{`handler "broken" secret store unreachable`, `handler "empty" returned no credential`} {
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
	if c := mustSelect(t, v); c.Key != "broken" {
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

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := v.Select(ctx)
	if elapsed := time.Since(start); elapsed > 2*time.Second {
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
	eventually(t, "the retry timer", func() bool { return clk.HasWaiters() })
	clk.Step(2 * time.Minute) // past the backoff, bounded at a minute
	if c := <-done; c.Key != "flaky" {
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
		eventually(t, "a retry timer", func() bool { return clk.HasWaiters() })
		clk.Step(time.Second)
	}
	if err := <-done; err == nil || h.calls.Load() != 3 {
		t.Errorf("Select() = %v after %d calls, want an error after 3", err, h.calls.Load())
	}
}

// A handler that panics, one that hangs past its timeout and one that
// returns garbage fail their attempts; a good handler keeps the vault working.
func TestBadHandlersDoNotTakeTheVaultDown(t *testing.T) {
	v, _ := testVault(t, Options{})
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
	for _, h := range v.handlers {
		h.retryAt = time.Time{}
	}
	v.mu.Unlock()
	if c := mustSelect(t, v); c.Key != "good" {
		t.Errorf("Select() = %v, want the good handler's credential", c)
	}
}
