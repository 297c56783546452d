package vault

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/authvault/authvault/login"
)

// A refresh that keeps failing retries more often as its credential's
// expiry nears, whatever its backoff has grown to: the last retry comes
// within a couple of login floors of the expiry, so that an issuer outage
// that ends before the credential does is caught while it still serves.
// (Before, the retries followed the backoff alone: 1, 2, 4, 8, 16 s after
// the refresh started, the last one 15 s before the expiry, the next 16 s
// after it, while callers waited.)
func TestFailedRefreshRetriesBeforeTheExpiry(t *testing.T) {
	synctest.Test(t, testFailedRefreshRetriesBeforeTheExpiry)
}

// testFailedRefreshRetriesBeforeTheExpiry is its body, in a synctest bubble.
func testFailedRefreshRetriesBeforeTheExpiry(t *testing.T) {
	v, clk := testVault(t, Options{Leeway: -1})
	v.core.jitter = func(int64) int64 { return 0 }
	h := &counter{lifetime: 100 * time.Second, now: clk.Now}
	v.OnLogin(h.login, login.ID("issuer"), login.Backoff(time.Second, time.Hour))
	first := mustSelect(t, v)
	expiry := first.usableUntil
	h.failWith(errors.New("issuer outage"))

	var calls []time.Duration // when the handler was called, before the expiry
	seen := h.calls.Load()
	for now := epoch; now.Before(expiry); now = now.Add(100 * time.Millisecond) {
		clk.SetTime(now)
		// A woken retry runs and arms its next timer before the clock
		// moves on (synctest.Wait): a millisecond's sleep let a busy
		// machine arm it a few steps late, on a later now.
		synctest.Wait()
		if n := h.calls.Load(); n != seen {
			seen = n
			calls = append(calls, expiry.Sub(now))
		}
	}
	if len(calls) < 3 {
		t.Fatalf("the refresh was tried %d times before the expiry", len(calls))
	}
	if last := calls[len(calls)-1]; last > 3*time.Second {
		t.Errorf("the last retry came %v before the expiry (retries at %v before it), want within 3 s", last, calls)
	}
	if len(calls) > 20 {
		t.Errorf("%d retries in the refresh window: a storm", len(calls))
	}
}

// The retries the expiry brings forward do not grow the backoff as if
// they had waited it: a refresh that still fails past the expiry (an
// outage that outlasts the credential) retries after the backoff its
// uncapped retries reached, not after the many steps the capped ones added
// (before: 512 s after the first failure past the expiry with Backoff(1 s,
// 1 h), where the backoff alone gives 32 s).
func TestFailedRefreshCapDoesNotGrowTheBackoff(t *testing.T) {
	synctest.Test(t, testFailedRefreshCapDoesNotGrowTheBackoff)
}

// testFailedRefreshCapDoesNotGrowTheBackoff is its body, in a synctest bubble.
func testFailedRefreshCapDoesNotGrowTheBackoff(t *testing.T) {
	v, clk := testVault(t, Options{Leeway: -1})
	v.core.jitter = func(int64) int64 { return 0 }
	h := &counter{lifetime: 100 * time.Second, now: clk.Now}
	v.OnLogin(h.login, login.ID("issuer"), login.Backoff(time.Second, time.Hour))
	expiry := mustSelect(t, v).usableUntil
	h.failWith(errors.New("issuer outage"))

	seen := h.calls.Load()
	var failedAfter time.Time // the first call past the expiry
	var gap time.Duration     // from it to the next call
	for now := epoch; now.Before(expiry.Add(10 * time.Minute)); now = now.Add(100 * time.Millisecond) {
		clk.SetTime(now)
		synctest.Wait() // as in TestFailedRefreshRetriesBeforeTheExpiry
		if n := h.calls.Load(); n != seen {
			seen = n
			if !failedAfter.IsZero() {
				gap = now.Sub(failedAfter)
				break
			}
			if now.After(expiry) {
				failedAfter = now
			}
		}
	}
	if gap == 0 || gap > 40*time.Second {
		t.Errorf("the retry after the first failure past the expiry came %v after it, want within 40 s (the backoff alone gives 32 s)", gap)
	}
}
