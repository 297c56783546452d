package vault

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/authvault/authvault/login"
)

// A refresh that keeps failing outlives its credential: Ready counts the
// grace from the expiry, not from a login that began as a refresh while the
// credential still served, and reports the LoginError once it has passed.
func TestReadyCountsFromExpiryDuringAFailingRefresh(t *testing.T) {
	synctest.Test(t, testReadyCountsFromExpiryDuringAFailingRefresh)
}

// testReadyCountsFromExpiryDuringAFailingRefresh is its body, in a synctest bubble.
func testReadyCountsFromExpiryDuringAFailingRefresh(t *testing.T) {
	v, clk := testVault(t, Options{ReadyGrace: time.Minute})
	v.core.jitter = func(int64) int64 { return 0 }
	h := &counter{lifetime: 10 * time.Minute, now: clk.Now}
	v.OnLogin(h.login, login.ID("r"), login.Backoff(10*time.Second, 10*time.Second))
	mustSelect(t, v)
	h.failWith(errors.New("token endpoint down"))

	clk.SetTime(epoch.Add(531 * time.Second)) // the refresh starts, and fails
	eventually(t, "the failing refresh", func() bool { return h.calls.Load() >= 2 })

	// The credential's usable life is over; the refresh still retries.
	// Each step's retry runs before the next step (synctest.Wait), not
	// within a millisecond of a machine that may be busy.
	for range 60 {
		clk.Step(10 * time.Second)
		synctest.Wait()
	}
	if err := v.Ready(nil); err == nil {
		v.mu.Lock()
		running := v.core.lookup("r").running
		v.mu.Unlock()
		t.Errorf("Ready() = nil %v after the only credential expired (refresh failing %d times, login running: %v), want a LoginError",
			clk.Since(epoch.Add(590*time.Second)), h.calls.Load()-1, running)
	}
}
