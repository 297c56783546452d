package vault

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
)

// rereader is a handler that re-reads a source: it returns the token the
// source holds, with its RefreshAfter and an expiration from expires.
type rereader struct {
	token        atomic.Pointer[string]
	refreshAfter time.Duration
	expires      func() time.Time // nil: never
	calls        atomic.Int64
}

func newRereader(token string, refreshAfter time.Duration) *rereader {
	r := &rereader{refreshAfter: refreshAfter}
	r.token.Store(&token)
	return r
}

func (r *rereader) login(context.Context) (*login.ConnectionInfo, error) {
	r.calls.Add(1)
	info := &login.ConnectionInfo{Server: "https://api.example:6443", Token: *r.token.Load(), RefreshAfter: r.refreshAfter}
	if r.expires != nil {
		info.Expiration = r.expires()
	}
	return info, nil
}

// settled waits until no login runs and the vault's timer is armed for
// later than now (or not at all): whatever the last clock step made due
// has run.
func settled(t *testing.T, v *Vault, clk *testingclock.FakeClock) {
	t.Helper()
	eventually(t, "a settled vault", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return !v.core.loggingIn() && (v.timers.tickAt.IsZero() || v.timers.tickAt.After(clk.Now()))
	})
}

// A handler that asks to be asked again in 30 s is, every 30 s, whether it
// gives the same credential or a new one; not at a fraction of an
// expiration it would have had to invent.
func TestRefreshAfterSetsTheHandlersPace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rotates bool
	}{{"same token", false}, {"new token each time", true}} {
		t.Run(tc.name, func(t *testing.T) {
			v, clk := testVault(t, Options{})
			r := newRereader("t0", 30*time.Second)
			v.OnLogin(r.login, login.ID("reread"))
			mustSelect(t, v)
			settled(t, v, clk)
			for i := int64(1); i <= 10; i++ {
				for range 29 {
					clk.Step(time.Second)
					settled(t, v, clk)
				}
				if got := r.calls.Load(); got != i {
					t.Fatalf("%s after the start: %d calls, want %d (one every 30 s)", clk.Since(epoch), got, i)
				}
				if tc.rotates {
					next := "t" + string(rune('0'+i))
					r.token.Store(&next)
				}
				clk.Step(time.Second)
				settled(t, v, clk)
				if got := r.calls.Load(); got != i+1 {
					t.Fatalf("%s after the start: %d calls, want %d (one every 30 s)", clk.Since(epoch), got, i+1)
				}
				c := mustSelect(t, v)
				if want := *r.token.Load(); c.Info.Token != want {
					t.Fatalf("Select() = token %q after the re-read, want %q", c.Info.Token, want)
				}
			}
		})
	}
}

// RefreshAfter never makes a handler log in more often than its login
// floor, and an expiration sooner than it still gets its refresh first.
func TestRefreshAfterBounds(t *testing.T) {
	t.Run("floor", func(t *testing.T) {
		v, clk := testVault(t, Options{})
		r := newRereader("t", time.Millisecond)
		v.OnLogin(r.login, login.ID("reread"), login.Backoff(5*time.Second, time.Minute))
		mustSelect(t, v)
		settled(t, v, clk)
		for range 4 {
			clk.Step(time.Second)
			settled(t, v, clk)
		}
		if got := r.calls.Load(); got != 1 {
			t.Fatalf("%d calls within the 5 s floor, want 1", got)
		}
		clk.Step(time.Second)
		settled(t, v, clk)
		if got := r.calls.Load(); got != 2 {
			t.Fatalf("%d calls at the 5 s floor, want 2", got)
		}
	})
	t.Run("floor with a new token each time", func(t *testing.T) {
		v, clk := testVault(t, Options{})
		r := newRereader("t0", time.Nanosecond)
		v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
			next := fmt.Sprint("t", r.calls.Load()+1)
			r.token.Store(&next)
			return r.login(ctx)
		}, login.ID("reread"), login.Backoff(5*time.Second, time.Minute))
		mustSelect(t, v)
		settled(t, v, clk)
		for range 60 {
			clk.Step(time.Second)
			settled(t, v, clk)
		}
		if got := r.calls.Load(); got != 13 {
			t.Fatalf("%d calls in 60 s with a 5 s floor, want 13", got)
		}
	})
	for name, after := range map[string]time.Duration{"far future": math.MaxInt64, "negative": -time.Hour, "least": math.MinInt64} {
		t.Run(name, func(t *testing.T) {
			v, clk := testVault(t, Options{Leeway: -1})
			v.core.jitter = func(int64) int64 { return 0 }
			r := newRereader("t", after)
			r.expires = func() time.Time { return clk.Now().Add(time.Hour) }
			v.OnLogin(r.login, login.ID("reread"))
			mustSelect(t, v)
			// Only the expiry asks: refreshed when 6 min of 60 are left.
			for range 120 {
				clk.Step(time.Minute)
				settled(t, v, clk)
			}
			if got := r.calls.Load(); got != 3 {
				t.Fatalf("%d calls in 2 h of one-hour credentials, want 3", got)
			}
		})
	}
	t.Run("expiration first", func(t *testing.T) {
		v, clk := testVault(t, Options{Leeway: -1})
		v.core.jitter = func(int64) int64 { return 0 }
		r := newRereader("t", time.Hour)
		r.expires = func() time.Time { return clk.Now().Add(10 * time.Minute) }
		v.OnLogin(r.login, login.ID("reread"))
		first := mustSelect(t, v)
		// Usable for 600 s: refreshed when 60 s are left.
		clk.Step(540*time.Second - time.Millisecond)
		settled(t, v, clk)
		if got := r.calls.Load(); got != 1 {
			t.Fatalf("%d calls before the refresh window, want 1", got)
		}
		clk.Step(time.Millisecond)
		settled(t, v, clk)
		if got := current(v, "reread"); r.calls.Load() != 2 || got == first {
			t.Fatalf("%d calls at the refresh window, credential %v, want 2 and a new credential", r.calls.Load(), got)
		}
	})
}

// A refresh that gives the credential the vault holds, even with a new
// expiration, says so at V(1) only; one that gives a new credential says
// it at INFO.
func TestUnchangedCredentialIsNotLoggedAtInfo(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(0)})
	r := newRereader("t0", 0)
	// The expiration moves with every read: the token does not.
	r.expires = func() time.Time { return clk.Now().Add(time.Hour) }
	v.OnLogin(r.login, login.ID("reread"))
	mustSelect(t, v)
	for range 3 {
		clk.Step(time.Minute)
		v.Refresh()
		settled(t, v, clk)
	}
	if got := r.calls.Load(); got != 4 {
		t.Fatalf("%d calls, want 4", got)
	}
	if lines := logLines(&logs, "logged in"); len(lines) != 1 || !strings.Contains(lines[0], `"reason"="first login"`) {
		t.Errorf("INFO lines \"logged in\" = %q, want only the first login's: the credential did not change", lines)
	}

	next := "t1"
	r.token.Store(&next)
	clk.Step(time.Minute)
	v.Refresh()
	settled(t, v, clk)
	if lines := logLines(&logs, "logged in"); len(lines) != 2 || !strings.Contains(lines[1], `"reason"="refresh before expiry"`) {
		t.Errorf("INFO lines \"logged in\" = %q, want the first login's and the new credential's", lines)
	}
}

// At V(1), an unchanged credential's line says that it is unchanged.
func TestUnchangedCredentialIsLoggedAtV1(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(1)})
	r := newRereader("t0", 0)
	r.expires = func() time.Time { return clk.Now().Add(time.Hour) }
	v.OnLogin(r.login, login.ID("reread"))
	mustSelect(t, v)
	clk.Step(time.Minute)
	v.Refresh()
	settled(t, v, clk)
	lines := logLines(&logs, "logged in: the credential is unchanged")
	if len(lines) != 1 || !strings.Contains(lines[0], `"level"=1`) || !strings.Contains(lines[0], `"expiration"="2026-01-01 01:01:00 +0000 UTC"`) {
		t.Errorf("lines = %q, want one at V(1) with the new expiration", lines)
	}
}

// A credential that never expires, read again because its handler asked
// (RefreshAfter), is logged with the reason "reread as RefreshAfter asked"
// and its handler is told so: before, such a reread said "refresh before
// expiry" beside "expiration":"never". One whose expiry draws near is
// still a refresh before expiry.
func TestRereadIsNotARefreshBeforeExpiry(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(0)})
	v.core.jitter = func(int64) int64 { return 0 }
	r := newRereader("t0", time.Minute)
	var reasons []login.Reason
	var mu sync.Mutex
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		reason, _ := login.ReasonFrom(ctx)
		mu.Lock()
		reasons = append(reasons, reason)
		mu.Unlock()
		return r.login(ctx)
	}, login.ID("reread"))
	mustSelect(t, v)
	next := "t1"
	r.token.Store(&next)
	clk.Step(time.Minute)
	settled(t, v, clk)
	mu.Lock()
	got := slices.Clone(reasons)
	mu.Unlock()
	if len(got) != 2 || got[1].Kind != login.Reread {
		t.Fatalf("the handler's reasons = %v, want the first login's and a reread", got)
	}
	lines := logLines(&logs, "logged in")
	if len(lines) != 2 || !strings.Contains(lines[1], `"reason"="reread as RefreshAfter asked"`) || !strings.Contains(lines[1], `"expiration"="never"`) {
		t.Errorf("INFO lines \"logged in\" = %q, want the reread's with its reason", lines)
	}
	for _, line := range logLines(&logs, "") {
		if strings.Contains(line, "refresh before expiry") {
			t.Errorf("a credential that never expires was logged as refreshed before expiry: %s", line)
		}
	}
}
