package vault

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
)

// getStatus sends a GET through v's transport within timeout and returns
// the status, or 0 with the error.
func getStatus(v *Vault, url string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := v.Transport().RoundTrip(req)
	if err != nil {
		return 0, err
	}
	discard(resp)
	return resp.StatusCode, nil
}

// Tokens revoked faster than the login floor (every 150 ms; the floor is
// the default initial backoff, 1 s) while callers keep asking: they may
// fail during the storm, but once it ends the vault serves again within
// the floor and a second, with no backoff left over, so that the next
// revocation is a silent re-login.
func TestStormEndsCleanly(t *testing.T) {
	const (
		floor   = handlerconf.DefaultBackoffInitial
		every   = 150 * time.Millisecond
		storm   = 3 * time.Second
		callers = 4
	)
	v, srv, iss := issuingVault(t, Options{}, "")
	url := srv.URL() + "/x"
	if status, err := getStatus(v, url, 5*time.Second); status != http.StatusOK {
		t.Fatalf("GET before the storm: %d %v", status, err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := getStatus(v, url, 2*time.Second); err != nil {
					// A LoginError at once while the handler backs off:
					// do not spin.
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	ticker := time.NewTicker(every)
	for end := time.Now().Add(storm); time.Now().Before(end); {
		<-ticker.C
		iss.mu.Lock()
		issued := append([]string(nil), iss.issued...)
		iss.mu.Unlock()
		for _, tok := range issued {
			srv.revoke(tok)
		}
	}
	ticker.Stop()
	ended := time.Now()

	var recovered time.Duration
	for {
		status, _ := getStatus(v, url, 5*time.Second)
		if status == http.StatusOK {
			recovered = time.Since(ended)
			break
		}
		if time.Since(ended) > 15*time.Second {
			close(stop)
			wg.Wait()
			t.Fatal("the vault does not serve 15 s after the storm")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("served again %v after the storm's end; %d tokens issued", recovered.Round(time.Millisecond), iss.count())
	// On an idle machine this is the floor and a fraction of a second
	// (0.99–1.09 s measured; the log line above shows it). The bound here
	// is what no busy machine explains: a backoff left over from the storm
	// would show as 4 s or more, and the strikes and backoff checked below
	// say directly that none was left.
	if limit := floor + 3*time.Second; recovered > limit {
		t.Errorf("served again %v after the storm's end, want within the login floor and a few seconds (%v)", recovered, limit)
	}

	h := mustSelect(t, v).owner
	v.mu.Lock()
	strikes, next, retryAt := h.strikes, h.backoff.Duration, h.retryAt
	v.mu.Unlock()
	if strikes != 0 || next != floor || !retryAt.IsZero() {
		t.Errorf("after the storm: %d strikes, next backoff %v, retry at %v; want none left: 0, %v, zero", strikes, next, retryAt, floor)
	}
	// The next revocation is an ordinary one: a silent re-login.
	srv.revoke(iss.latest())
	if resp, err := noDeadlineGet(t, v, url); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET after a revocation past the storm: %v %v, want a silent re-login", resp, err)
	}
}
