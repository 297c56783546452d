package vault

import (
	"testing"
	"time"

	"github.com/authvault/authvault/login"
)

// Review of the tick timer (issue 23): each test shows a problem.

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
