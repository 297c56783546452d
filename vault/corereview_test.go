package vault

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

// Review of the vault's core as a state machine (issue 23): each test
// shows a problem.

// A tick timer that fires while another event holds v.mu, and that event
// re-arms the timer for the next deadline, must not leave that next timer
// behind: the late callback used to forget whichever timer was armed by
// then, so it was never stopped, not even by Close, and every later
// deadline fired twice (each race added a timer for good). The test holds
// v.mu over the window and runs in it what a Select on the slow path does.
func TestTickFiredWhileReArmedLeavesNoTimer(t *testing.T) {
	v, clk := testVault(t, Options{FirstLoginWait: -1})
	v.core.jitter = func(int64) int64 { return 0 }
	soon := &counter{lifetime: 10 * time.Minute, now: clk.Now}
	late := &counter{lifetime: time.Hour, now: clk.Now}
	v.OnLogin(soon.login, login.ID("soon"))
	v.OnLogin(late.login, login.ID("late"))
	mustSelect(t, v)
	eventually(t, "both credentials", func() bool { return v.snap.Load().size() == 2 })

	v.mu.Lock()
	soonRefresh, lateRefresh := v.core.lookup("soon").refreshAt, v.core.lookup("late").refreshAt
	if !soonRefresh.Before(lateRefresh) {
		v.mu.Unlock()
		t.Fatalf("refreshes at %v and %v, want soon's first", soonRefresh, lateRefresh)
	}
	clk.SetTime(soonRefresh) // the tick fires; its callback waits for v.mu
	// Meanwhile a caller's slow path runs what is due (soon's refresh) and
	// arms the timer for late's refresh.
	e, _, _, _ := v.core.wanted(clk.Now())
	v.applyLocked(e)
	v.mu.Unlock()

	eventually(t, "soon's refresh", func() bool { return soon.calls.Load() == 2 && idle(v) })
	v.Close()
	if clk.HasWaiters() {
		t.Error("a timer is still armed on the vault's clock after Close")
	}
}

// Refresh on a vault whose fallback serves while the handlers registered
// since have no credential (they failed) logs those handlers in as a
// first-login round, which holds back every credential from the first one
// the round gives, the fallback's too: callers that had a credential wait
// for the slowest handler's first attempt, or FirstLoginWait. Refresh
// promises the opposite: no request waits for the new credentials.
func TestRefreshKeepsServingWhileLateHandlersLogIn(t *testing.T) {
	fallback := &counter{priority: 30, lifetime: 10 * time.Minute}
	v, clk := testVault(t, Options{FirstLoginWait: time.Hour,
		Fallback: []login.Registration{{Handler: fallback.login, Options: []login.Option{login.ID("fallback")}}}})
	fallback.now = clk.Now
	if c := mustSelect(t, v); c.Handler != "fallback" {
		t.Fatalf("Select() = %v, want the fallback's credential", c)
	}
	fast, slow := &counter{}, &counter{}
	fast.failWith(errors.New("store down"))
	slow.failWith(errors.New("store down"))
	v.OnLogin(fast.login, login.ID("fast"), login.Retries(0))
	v.OnLogin(slow.login, login.ID("slow"), login.Retries(0))
	// Registered above what serves, both log in at once, and fail. The
	// clock moves only once they are done: a login that ended after the
	// step below (its backoff counted from then) was not asked again at
	// the refresh, one that ended before it was, and the test timed out
	// waiting for one call each on a loaded machine.
	eventually(t, "the first logins", func() bool { return fast.calls.Load() == 1 && slow.calls.Load() == 1 && idle(v) })
	clk.Step(9 * time.Minute) // the fallback's refresh: both log in above it again, and fail
	eventually(t, "the refresh and the logins above it", func() bool {
		return fallback.calls.Load() == 2 && fast.calls.Load() == 2 && slow.calls.Load() == 2 && idle(v)
	})

	fast.heal()
	slow.block = make(chan struct{})
	defer close(slow.block)
	v.Refresh()
	clk.Step(time.Second) // the login floor
	eventually(t, "fast's credential", func() bool { return current(v, "fast") != nil })
	// fast's credential is there: Select is to return it at once, not to
	// wait for slow, which never answers; the deadline is only a hang's.
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if c, err := v.Select(ctx); err != nil {
		t.Fatalf("Select() after Refresh: %v, want a credential: one served before it", err)
	} else if c.Handler != "fast" {
		t.Errorf("Select() = %v, want fast's credential", c)
	}
}

// A handler registered while the fallback serves is above it (see
// KeepFallback), yet it was not called until some later event (a refresh,
// a 401) had the vault look again: with a credential that never expires,
// such as a kubeconfig's token, the fallback, another cluster perhaps,
// served for good. A registered handler that ranks above what serves logs
// in at once.
func TestHandlerRegisteredLateLogsInAboveTheFallback(t *testing.T) {
	fallback := &counter{priority: 30}
	v, _ := testVault(t, Options{Fallback: []login.Registration{{Handler: fallback.login, Options: []login.Option{login.ID("fallback")}}}})
	if c := mustSelect(t, v); c.Handler != "fallback" {
		t.Fatalf("Select() = %v, want the fallback's credential", c)
	}
	mine := &counter{}
	v.OnLogin(mine.login, login.ID("mine"))
	eventually(t, "mine's credential", func() bool { return current(v, "mine") != nil })
	if c := mustSelect(t, v); c.Handler != "mine" {
		t.Errorf("Select() = %v, want mine's credential", c)
	}
}

// A vault that has not been used starts nothing when a handler is
// registered, and makes no fallback handler (they would show in its
// metrics and LoginErrors).
func TestHandlerRegisteredBeforeUseStartsNothing(t *testing.T) {
	fallback := &counter{}
	v, _ := testVault(t, Options{KeepFallback: true,
		Fallback: []login.Registration{{Handler: fallback.login, Options: []login.Option{login.ID("fallback")}}}})
	mine := &counter{}
	v.OnLogin(mine.login, login.ID("mine"))
	v.mu.Lock()
	made := len(v.core.fallback)
	v.mu.Unlock()
	if made != 0 || mine.calls.Load() != 0 || fallback.calls.Load() != 0 {
		t.Errorf("after OnLogin on an unused vault: %d fallback handlers made, %d and %d calls; want none",
			made, mine.calls.Load(), fallback.calls.Load())
	}
}
