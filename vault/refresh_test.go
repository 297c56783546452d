package vault

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
)

// In steady state the fake clock has two timers: the credential's refresh
// and the snapshot's expiry.

// current is the credential the vault holds for the handler key, or nil.
func current(v *Vault, key string) *Credential {
	v.mu.Lock()
	defer v.mu.Unlock()
	if h := v.core.lookup(key); h != nil {
		return h.cred
	}
	return nil
}

// Point 7: the handler reruns in the background before expiry; the old
// credential serves until the new one arrives; no caller waits.
func TestRefreshBeforeExpiry(t *testing.T) {
	v, clk := testVault(t, Options{})
	v.core.jitter = func(int64) int64 { return 0 }
	h := &counter{lifetime: 10 * time.Minute, now: clk.Now, block: make(chan struct{})}
	close(h.block)
	v.OnLogin(h.login, login.ID("expiring"))
	first := mustSelect(t, v)
	waitedBefore := v.waits.waited.Load() // the very first login
	h.block = make(chan struct{})         // the refresh will wait for us

	// Usable for 590 s (10 s leeway); the window is a tenth of that, 59 s.
	refreshAt := epoch.Add(590*time.Second - 59*time.Second)
	clk.SetTime(refreshAt.Add(-time.Millisecond))
	if clk.Waiters() != 2 {
		t.Fatalf("fake clock waiters = %d before the refresh time, want the refresh and expiry timers", clk.Waiters())
	}
	clk.SetTime(refreshAt)
	eventually(t, "the refresh to start", func() bool { return h.calls.Load() == 2 })
	if c := mustSelect(t, v); c != first {
		t.Errorf("Select() during the refresh = %v, want the old credential", c)
	}
	close(h.block)
	eventually(t, "the new credential", func() bool { return current(v, "expiring") != first })
	second := mustSelect(t, v)
	if second == first || !second.Info.Expiration.Equal(refreshAt.Add(10*time.Minute)) {
		t.Errorf("Select() = %v expiring %v, want the refreshed credential", second, second.Info.Expiration)
	}
	if got := v.waits.waited.Load() - waitedBefore; got != 0 {
		t.Errorf("%d callers waited, want none", got)
	}
}

func TestRefreshWindowFitsShortLifetimes(t *testing.T) {
	v, clk := testVault(t, Options{Leeway: -1})
	v.core.jitter = func(n int64) int64 { return n - 1 } // the earliest refresh
	h := &counter{lifetime: 20 * time.Second, now: clk.Now}
	v.OnLogin(h.login)
	first := mustSelect(t, v)
	// 30 s does not fit a 20 s life: the window is half of it, 10 s, plus
	// up to half the window of jitter: the refresh comes at 5 s.
	clk.SetTime(epoch.Add(5*time.Second - time.Millisecond))
	if clk.Waiters() != 2 { // the refresh and expiry timers
		t.Fatal("refresh fired too early")
	}
	clk.SetTime(epoch.Add(5 * time.Second))
	eventually(t, "the refreshed credential", func() bool { return current(v, first.Handler) != first })
}

// In steady state callers never wait, and the handler runs once per lifetime.
func TestSteadyStateNeverWaits(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{lifetime: 15 * time.Minute, now: clk.Now}
	v.OnLogin(h.login, login.ID("steady"))
	c := mustSelect(t, v)
	const rotations = 20
	for i := range rotations {
		// Walk through the credential's life a minute at a time, letting
		// each step's refresh finish as real time would, selecting at each.
		for range 14 {
			clk.Step(time.Minute)
			eventually(t, "a settled vault", func() bool { return clk.Waiters() == 2 && idle(v) })
			mustSelect(t, v)
			if next := current(v, "steady"); next != c {
				c = next
				break
			}
		}
		if got := h.calls.Load(); got != int64(i+2) {
			t.Fatalf("rotation %d: handler calls = %d, want %d", i, got, i+2)
		}
	}
	if got := v.waits.waited.Load(); got != 1 {
		t.Errorf("%d callers waited for a login, want only the very first", got)
	}
	if got := h.calls.Load(); got != rotations+1 {
		t.Errorf("handler calls = %d over %d rotations, want %d", got, rotations, rotations+1)
	}
}

// A failed refresh keeps the old credential until it really expires, and
// retries with backoff meanwhile.
func TestFailedRefreshKeepsServing(t *testing.T) {
	v, clk := testVault(t, Options{})
	v.core.jitter = func(int64) int64 { return 0 }
	h := &counter{lifetime: 10 * time.Minute, now: clk.Now}
	v.OnLogin(h.login, login.ID("r"), login.Retries(0), login.Backoff(10*time.Second, 10*time.Second))
	first := mustSelect(t, v)
	h.failWith(errors.New("token endpoint down"))

	clk.SetTime(epoch.Add(531 * time.Second))
	eventually(t, "the failed refresh", func() bool { return h.calls.Load() == 2 && idle(v) })
	if c := mustSelect(t, v); c != first {
		t.Fatalf("Select() after a failed refresh = %v, want the old credential", c)
	}
	clk.Step(12 * time.Second) // the backoff, with jitter
	eventually(t, "the retried refresh", func() bool { return h.calls.Load() == 3 && idle(v) })
	if c := mustSelect(t, v); c != first {
		t.Fatalf("Select() = %v, want the old credential still", c)
	}

	clk.SetTime(epoch.Add(590 * time.Second)) // its usable life is over
	le := selectErr(t, v)
	if err := le.Handlers[0].Err; err == nil || err.Error() != "token endpoint down" {
		t.Errorf("LoginError = %v, want the refresh's failure", le)
	}

	h.heal()
	clk.Step(time.Minute)
	if c := mustSelect(t, v); c == first {
		t.Error("Select() handed out the expired credential")
	}
}

// A refresh that returns the credential the vault already has is retried.
func TestUnchangedRefreshIsRetried(t *testing.T) {
	v, clk := testVault(t, Options{})
	v.core.jitter = func(int64) int64 { return 0 }
	expiry := epoch.Add(10 * time.Minute)
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: "https://a", Token: "fixed", Expiration: expiry}, nil
	}, login.ID("fixed"), login.Retries(0))
	first := mustSelect(t, v)
	clk.SetTime(epoch.Add(531 * time.Second))
	eventually(t, "the refresh outcome", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return errors.Is(v.core.lookup("fixed").outcome, errUnchanged)
	})
	if c := mustSelect(t, v); c != first {
		t.Errorf("Select() = %v, want the credential it has", c)
	}
}
