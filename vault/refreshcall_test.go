package vault

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authvault/authvault/login"
)

// Refresh replaces a credential before it expires: the old one serves
// while the handler runs, no caller waits, and calling it again while the
// login runs does not call the handler twice.
func TestRefreshCallReplacesTheCredentialInTheBackground(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{lifetime: time.Hour, now: clk.Now}
	v.OnLogin(h.login, login.ID("secret"))
	first := mustSelect(t, v)
	waitedBefore := v.waits.waited.Load()
	h.block = make(chan struct{})
	clk.Step(2 * time.Second) // past the login floor

	v.Refresh()
	eventually(t, "the handler to be called", func() bool { return h.calls.Load() == 2 })
	v.Refresh()
	v.Refresh()
	if c := mustSelect(t, v); c != first {
		t.Errorf("Select() during the refresh = %v, want the old credential", c)
	}
	close(h.block)
	eventually(t, "the new credential", func() bool { return current(v, "secret") != first })
	if c := mustSelect(t, v); c.Info.Token != "token-2" {
		t.Errorf("Select() = %v, want token-2", c)
	}
	if got := h.calls.Load(); got != 2 {
		t.Errorf("handler called %d times, want 2: a refresh under way is not started again", got)
	}
	if got := v.waits.waited.Load() - waitedBefore; got != 0 {
		t.Errorf("%d callers waited, want none", got)
	}
}

// A refresh within the login floor comes at the floor.
func TestRefreshCallHonoursTheLoginFloor(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{}
	v.OnLogin(h.login, login.ID("secret"), login.Backoff(10*time.Second, time.Minute))
	first := mustSelect(t, v)
	if clk.HasWaiters() {
		t.Fatal("a timer before the refresh")
	}
	v.Refresh()
	eventually(t, "the login to wait for the floor's timer", func() bool { return clk.HasWaiters() })
	if got := h.calls.Load(); got != 1 {
		t.Fatalf("handler called %d times within its login floor", got)
	}
	clk.Step(10 * time.Second)
	eventually(t, "the refreshed credential", func() bool { return current(v, "secret") != first })
}

// A handler backing off after a failed login runs at once on Refresh: what
// it reads may have been fixed (a Secret rewritten).
func TestRefreshCallRunsABackingOffHandler(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{}
	h.failWith(login.Permanent(errors.New("the Secret has no such key")))
	v.OnLogin(h.login, login.ID("secret"), login.Backoff(time.Second, time.Hour))
	retryAt := func() time.Time {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.core.lookup("secret").retryAt
	}
	for i := range 4 { // the backoff grows to 8 s
		if i > 0 {
			clk.SetTime(retryAt())
		}
		selectErr(t, v)
	}
	calls := h.calls.Load()
	if wait := retryAt().Sub(clk.Now()); wait < 4*time.Second {
		t.Fatalf("backoff left %v, want one past the login floor", wait)
	}
	clk.Step(time.Second) // past the floor, well within the backoff
	h.heal()
	v.Refresh()
	eventually(t, "a credential", func() bool { return current(v, "secret") != nil })
	if got := h.calls.Load(); got != calls+1 {
		t.Errorf("handler called %d more times, want 1", got-calls)
	}
}

func TestRefreshCallAfterCloseDoesNothing(t *testing.T) {
	v, _ := testVault(t, Options{})
	h := &counter{}
	v.OnLogin(h.login)
	mustSelect(t, v)
	v.Close()
	v.Refresh()
	if got := h.calls.Load(); got != 1 {
		t.Errorf("handler called %d times after Close, want 1", got)
	}
}

// Close unregisters the vault's metrics: its gauges are no longer
// reported, and a new vault can register on the same registerer.
func TestCloseUnregistersMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for range 2 {
		v, _ := testVault(t, Options{Registerer: reg})
		h := &counter{}
		v.OnLogin(h.login)
		mustSelect(t, v)
		if families, err := reg.Gather(); err != nil || len(families) == 0 {
			t.Fatalf("Gather() = %d families, %v; want the vault's", len(families), err)
		}
		v.Close()
		if families, err := reg.Gather(); err != nil || len(families) != 0 {
			t.Fatalf("after Close, Gather() = %d families, %v; want none", len(families), err)
		}
	}
}

// Refresh on a vault that has never logged in leaves it so: its first
// login, when it is used, reads what is current then.
func TestRefreshCallOnAnUnusedVaultDoesNothing(t *testing.T) {
	v, _ := testVault(t, Options{})
	h := &counter{}
	v.OnLogin(h.login)
	v.Refresh()
	if !idle(v) { // a login starts under the lock Refresh holds, or not at all
		t.Error("Refresh started a login on an unused vault")
	}
	if got := h.calls.Load(); got != 0 {
		t.Errorf("handler called %d times by Refresh on an unused vault, want 0", got)
	}
	mustSelect(t, v)
	if got := h.calls.Load(); got != 1 {
		t.Errorf("handler called %d times by the first Select, want 1", got)
	}
}
