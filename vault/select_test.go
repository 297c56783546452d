package vault

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// Point 1: random among the highest priority; lower ones only when those are gone.
func TestSelectPrefersTheHighestPriority(t *testing.T) {
	v, _ := testVault(t, Options{})
	high1, high2, low := &counter{priority: 10}, &counter{priority: 10}, &counter{priority: 1}
	v.OnLogin(high1.login, login.ID("high1"))
	v.OnLogin(high2.login, login.ID("high2"))
	v.OnLogin(low.login, login.ID("low"))
	mustSelect(t, v) // first login: all three run
	eventually(t, "all logins", func() bool { return idle(v) && v.snap.Load().size() == 3 })

	byKey := map[string]int{}
	for range 2000 {
		byKey[mustSelect(t, v).Handler]++
	}
	if byKey["low"] != 0 {
		t.Errorf("low priority selected %d times while high ones exist", byKey["low"])
	}
	for _, k := range []string{"high1", "high2"} {
		if byKey[k] < 700 { // expected 1000 each; 700 is far out in the tail
			t.Errorf("%s selected %d of 2000 times, want about half", k, byKey[k])
		}
	}
	for range 2 {
		c := mustSelect(t, v)
		if err := v.Invalidate(context.Background(), c, errors.New("401")); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		if c := mustSelect(t, v); c.Handler != "low" {
			t.Fatalf("Select() = %s, want low once the high ones are gone", c.Handler)
		}
	}
	if got := high1.calls.Load() + high2.calls.Load() + low.calls.Load(); got != 3 {
		t.Errorf("handlers ran %d times, want 3: a lower priority left is no reason to log in", got)
	}
}

// Point 2: expired credentials are never handed out; the leeway applies.
func TestSelectNeverHandsOutExpiredCredentials(t *testing.T) {
	tests := []struct {
		name     string
		leeway   time.Duration
		lifetime time.Duration
		usable   time.Duration // how long a credential is handed out
	}{
		{"default leeway", 0, time.Hour, time.Hour - 10*time.Second},
		{"custom leeway", time.Minute, time.Hour, time.Hour - time.Minute},
		{"short life gets a quarter", 0, 20 * time.Second, 15 * time.Second},
		{"no leeway", -1, time.Hour, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, clk := testVault(t, Options{Leeway: tt.leeway})
			h := &counter{lifetime: tt.lifetime, now: clk.Now}
			v.OnLogin(h.login, login.Retries(0))
			first := mustSelect(t, v)
			// Stop proactive refresh from replacing it: this test is about expiry.
			v.mu.Lock()
			first.owner.refreshAt = time.Time{}
			v.mu.Unlock()

			clk.SetTime(epoch.Add(tt.usable - time.Millisecond))
			if c := mustSelect(t, v); c != first {
				t.Fatalf("just before the leeway: Select() = %v, want the first credential", c)
			}
			clk.SetTime(epoch.Add(tt.usable))
			if c := mustSelect(t, v); c == first {
				t.Fatalf("at the leeway: Select() handed out the expiring credential")
			}
			if got := h.calls.Load(); got != 2 {
				t.Errorf("handler calls = %d, want 2", got)
			}
		})
	}
}

func TestExpiredOnArrivalIsRefused(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{lifetime: -time.Second, now: clk.Now}
	v.OnLogin(h.login, login.Retries(0))
	le := selectErr(t, v)
	if !errors.Is(le, errExpired) {
		t.Errorf("Select() error = %v, want errExpired", le)
	}
}

// Point 3: Invalidate removes exactly the object it is given.
func TestInvalidateRemovesExactlyThatCredential(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{}
	v.OnLogin(h.login)
	old := mustSelect(t, v)
	if err := v.Invalidate(context.Background(), old, errors.New("401")); err != nil {
		t.Fatal(err)
	}
	clk.Step(handlerconf.DefaultBackoffInitial) // past the login floor
	fresh := mustSelect(t, v)
	if fresh == old || fresh.Info.Token == old.Info.Token {
		t.Fatalf("Select() after Invalidate = %v, want a new credential", fresh)
	}
	// A late 401 on the old credential, twice: the fresh one stays.
	for range 2 {
		if err := v.Invalidate(context.Background(), old, errors.New("late 401")); err != nil {
			t.Fatal(err)
		}
	}
	if c := mustSelect(t, v); c != fresh {
		t.Errorf("Select() = %v, want the fresh credential to survive a late 401", c)
	}
	if got := h.calls.Load(); got != 2 {
		t.Errorf("handler calls = %d, want 2", got)
	}
	if err := v.Invalidate(context.Background(), nil, nil); err == nil {
		t.Error("Invalidate(nil) = nil, want an error")
	}
}

// Point 4: a copy of a recently invalidated credential is refused.
func TestRejectedCredentialIsNotTakenBack(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{}
	h.same.Store(true)
	v.OnLogin(h.login, login.Retries(0))
	c := mustSelect(t, v)
	_ = v.Invalidate(context.Background(), c, errors.New("401 Unauthorized"))
	clk.Step(handlerconf.DefaultBackoffInitial) // past the login floor
	le := selectErr(t, v)
	if !errors.Is(le, errInvalidated) {
		t.Errorf("Select() error = %v, want errInvalidated", le)
	}
	if !strings.Contains(le.Error(), "401 Unauthorized") || le.Server != "https://api.example:6443" {
		t.Errorf("LoginError = %v, want the server and the 401 cause", le)
	}
}

func TestOnlyTheLastFewInvalidatedAreRefused(t *testing.T) {
	v, clk := testVault(t, Options{InvalidatedRefused: 1})
	seq := []string{"a", "b", "a"}
	var calls int
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		tok := seq[calls%len(seq)]
		calls++
		return &login.ConnectionInfo{Server: "https://a", Token: tok}, nil
	}, login.Retries(0))
	a := mustSelect(t, v)
	_ = v.Invalidate(context.Background(), a, nil)
	clk.Step(handlerconf.DefaultBackoffInitial) // past the login floor
	b := mustSelect(t, v)
	_ = v.Invalidate(context.Background(), b, nil)
	clk.Step(time.Hour) // past any backoff
	if c := mustSelect(t, v); c.Info.Token != "a" {
		t.Errorf("Select() = %v, want token a: only b is remembered", c)
	}
}

// Point 5: one login however many callers wait.
func TestHerdCausesOneLoginPerHandler(t *testing.T) {
	const callers = 10000
	v, _ := testVault(t, Options{})
	a, b := &counter{block: make(chan struct{})}, &counter{block: make(chan struct{})}
	v.OnLogin(a.login)
	v.OnLogin(b.login)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			if _, err := v.Select(context.Background()); err != nil {
				errs <- err
			}
		})
	}
	eventually(t, "every caller waiting", func() bool { return v.waits.waiting.Load() == callers })
	close(a.block)
	close(b.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Select() error: %v", err)
	}
	if a.calls.Load() != 1 || b.calls.Load() != 1 {
		t.Errorf("handler calls = %d and %d, want 1 each", a.calls.Load(), b.calls.Load())
	}
}

// Point 8: handlers of one login run concurrently, and one's failure does
// not cost another's credential.
func TestHandlersRunConcurrently(t *testing.T) {
	v, _ := testVault(t, Options{})
	bCalled := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		select { // a sequential vault would never call b: deadlock, timeout
		case <-bCalled:
		case <-ctx.Done():
		}
		return nil, errors.New("a is broken")
	}, login.ID("a"), login.Retries(0))
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		close(bCalled)
		select { // b answers only after a failed
		case <-release:
		case <-ctx.Done():
		}
		return &login.ConnectionInfo{Server: "https://b", Token: "b"}, nil
	}, login.ID("b"))
	done := make(chan *Credential)
	go func() { done <- mustSelect(t, v) }()
	eventually(t, "a's failure", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.core.lookup("a").outcome != nil
	})
	release <- struct{}{}
	if c := <-done; c.Handler != "b" {
		t.Errorf("Select() = %v, want b's credential", c)
	}
}

// On an empty vault, callers get the highest priority the round gives: a
// fast, low-priority handler does not serve while a slower, higher one is
// still on its first attempt. Later selections go to the highest present.
func TestFirstLoginWaitsForHigherPriority(t *testing.T) {
	v, _ := testVault(t, Options{})
	slow := &counter{server: "https://kubeconfig", priority: 30, block: make(chan struct{})}
	fast := &counter{server: "https://in-cluster", priority: 20}
	v.OnLogin(slow.login, login.ID("kubeconfig"))
	v.OnLogin(fast.login, login.ID("serviceaccount"))
	got := make(chan *Credential, 1)
	go func() { got <- mustSelect(t, v) }()
	eventually(t, "the fast handler's credential", func() bool { return v.snap.Load().size() == 1 })
	select {
	case c := <-got:
		t.Fatalf("Select() = %v while the higher-priority handler still logs in, want a wait", c)
	case <-time.After(50 * time.Millisecond):
	}
	close(slow.block)
	if c := <-got; c.Handler != "kubeconfig" {
		t.Errorf("Select() = %v, want the higher priority's credential", c)
	}
}

// A handler whose first attempt fails releases the round as one that
// succeeds does: callers do not wait for its retries.
func TestFailedFirstAttemptReleasesTheRound(t *testing.T) {
	v, _ := testVault(t, Options{})
	broken := &counter{priority: 30}
	broken.failWith(errors.New("plugin not found"))
	v.OnLogin(broken.login, login.ID("broken")) // retries without end, on a fake clock
	v.OnLogin((&counter{priority: 20}).login, login.ID("fallback"))
	if c := mustSelect(t, v); c.Handler != "fallback" {
		t.Errorf("Select() = %v, want the lower priority once the higher failed its first attempt", c)
	}
}

// A handler that hangs holds the round back no longer than
// Options.FirstLoginWait; once it answers, its higher priority takes over.
func TestFirstLoginWaitIsBounded(t *testing.T) {
	v, clk := testVault(t, Options{FirstLoginWait: 3 * time.Second})
	hung := &counter{priority: 30, block: make(chan struct{})}
	fast := &counter{priority: 20}
	v.OnLogin(hung.login, login.ID("hung"))
	v.OnLogin(fast.login, login.ID("fast"))
	got := make(chan *Credential, 1)
	go func() { got <- mustSelect(t, v) }()
	eventually(t, "the fast handler's credential", func() bool { return v.snap.Load().size() == 1 })
	clk.Step(3*time.Second - time.Millisecond)
	select {
	case c := <-got:
		t.Fatalf("Select() = %v before the first-login wait passed", c)
	case <-time.After(30 * time.Millisecond):
	}
	clk.Step(time.Millisecond)
	if c := <-got; c.Handler != "fast" {
		t.Errorf("Select() = %v, want fast's credential once the wait passed", c)
	}
	close(hung.block)
	eventually(t, "the higher priority to take over", func() bool { return mustSelect(t, v).Handler == "hung" })
}

// With FirstLoginWait negative, the first credential is handed out at once.
func TestNoFirstLoginWait(t *testing.T) {
	v, _ := testVault(t, Options{FirstLoginWait: -1})
	slow := &counter{priority: 30, block: make(chan struct{})}
	defer close(slow.block)
	v.OnLogin(slow.login, login.ID("slow"))
	v.OnLogin((&counter{priority: 20}).login, login.ID("fast"))
	if c := mustSelect(t, v); c.Handler != "fast" {
		t.Errorf("Select() = %v, want fast's credential at once", c)
	}
}

// Point 9: Close wakes waiters with ErrClosed and is safe twice.
func TestCloseWakesWaiters(t *testing.T) {
	v, _ := testVault(t, Options{})
	h := &counter{block: make(chan struct{})} // never released: Close must cancel it
	v.OnLogin(h.login)
	errs := make(chan error, 10)
	for range 10 {
		go func() {
			_, err := v.Select(context.Background())
			errs <- err
		}()
	}
	eventually(t, "callers waiting", func() bool { return v.waits.waiting.Load() == 10 })
	v.Close()
	v.Close()
	for range 10 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("Select() error = %v, want ErrClosed", err)
		}
	}
	if _, err := v.Select(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Select() after Close = %v, want ErrClosed", err)
	}
	if err := v.Invalidate(context.Background(), &Credential{}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Invalidate() after Close = %v, want ErrClosed", err)
	}
	v.OnLogin(h.login) // ignored, no panic
}

// Point 10: no handler is a clear error; fallbacks run when none is registered.
func TestNoHandler(t *testing.T) {
	v, _ := testVault(t, Options{})
	le := selectErr(t, v)
	if !errors.Is(le, ErrNoHandlers) || !strings.Contains(le.Error(), "no login handler is registered") {
		t.Errorf("Select() error = %v, want ErrNoHandlers", le)
	}
}

func TestFallbackRunsOnlyWithoutHandlers(t *testing.T) {
	fb := &counter{server: "https://fallback"}
	v, _ := testVault(t, Options{Fallback: []login.Registration{{Handler: fb.login, Options: []login.Option{login.ID("fb")}}}})
	c := mustSelect(t, v)
	if c.Info.Server != "https://fallback" {
		t.Fatalf("Select() = %v, want the fallback's credential", c)
	}
	own := &counter{server: "https://own"}
	v.OnLogin(own.login)
	_ = v.Invalidate(context.Background(), c, errors.New("401"))
	if c := mustSelect(t, v); c.Info.Server != "https://own" {
		t.Errorf("Select() = %v, want the registered handler's credential", c)
	}
	if fb.calls.Load() != 1 {
		t.Errorf("fallback calls = %d, want 1", fb.calls.Load())
	}
}

func TestDuplicateIDsAreNumbered(t *testing.T) {
	v, _ := testVault(t, Options{})
	h := &counter{}
	v.OnLogin(h.login, login.ID("same"))
	v.OnLogin(h.login, login.ID("same"))
	v.OnLogin(h.login, login.ID("same"))
	v.mu.Lock()
	defer v.mu.Unlock()
	var ids []string
	for _, h := range v.core.handlers {
		ids = append(ids, h.settings.ID)
	}
	if got := strings.Join(ids, ","); got != "same,same#2,same#3" {
		t.Errorf("IDs = %s, want same,same#2,same#3", got)
	}
}

func TestPackageLevelOnLoginUsesDefault(t *testing.T) {
	before := len(Default.core.handlers)
	OnLogin((&counter{}).login, login.ID("default-test"))
	Default.mu.Lock()
	defer Default.mu.Unlock()
	if len(Default.core.handlers) != before+1 || Default.core.handlers[before].settings.ID != "default-test" {
		t.Error("OnLogin did not register with Default")
	}
	Default.core.handlers = Default.core.handlers[:before]
}
