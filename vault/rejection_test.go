package vault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

// noDeadlineGet sends a GET with no deadline, as client-go does by default,
// and fails the test if it has not returned within five seconds.
func noDeadlineGet(t *testing.T, v *Vault, url string) (*http.Response, error) {
	t.Helper()
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		resp, err := v.Transport().RoundTrip(req)
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		if r.resp != nil {
			discard(r.resp)
		}
		return r.resp, r.err
	case <-time.After(testwait.Hang):
		t.Fatalf("GET %s with no deadline hangs", url)
		return nil, nil
	}
}

// A static credential that the server rejects, with default options: the
// caller without a deadline gets a LoginError carrying the 401 at once, the
// handler is not asked again before its backoff, and once its source
// rotates the vault serves again.
func TestRejectedStaticCredentialFailsFastAndHeals(t *testing.T) {
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, "")
	var token atomic.Value
	token.Store("stale-token")
	var calls atomic.Int32
	// On a fake clock, so that "within the backoff" holds however long the
	// requests take: on a real one, a busy machine took longer than the
	// backoff to send the second GET.
	v, clk := testVault(t, Options{})
	const backoff = 300 * time.Millisecond
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		calls.Add(1)
		return &login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: token.Load().(string)}, nil
	}, login.ID("static"), login.Backoff(backoff, time.Second))

	// The login after the 401 waits for the login floor (the backoff's
	// first step): the clock moves until it has begun, and stands still
	// from then on.
	first := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/x", nil)
		resp, err := v.Transport().RoundTrip(req)
		if resp != nil {
			discard(resp)
		}
		first <- err
	}()
	eventually(t, "the login after the 401", func() bool {
		clk.Step(10 * time.Millisecond)
		return calls.Load() >= 2
	})
	var err error
	select {
	case err = <-first:
	case <-time.After(testwait.Hang):
		t.Fatal("the first GET with no deadline hangs")
	}
	var le *LoginError
	if !errors.As(err, &le) || !errors.Is(err, errInvalidated) {
		t.Fatalf("GET with a rejected static token: error %v, want a LoginError with errInvalidated", err)
	}
	var unauthorized *UnauthorizedError
	if !errors.As(err, &unauthorized) || !strings.Contains(err.Error(), "401") {
		t.Errorf("LoginError = %v, want the 401 as its cause", err)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("handler called %d times, want 2: the first login and one after the 401", got)
	}

	// Within the backoff (the clock stands still): a LoginError at once,
	// and no call. A GET that waited for the backoff to pass would not
	// return (noDeadlineGet fails it).
	if _, err := noDeadlineGet(t, v, srv.URL()+"/x"); !errors.Is(err, errInvalidated) {
		t.Errorf("second GET: %v, want errInvalidated", err)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("handler called %d times within its backoff, want still 2", got)
	}

	// The source rotates: after the backoff, the new token serves.
	token.Store("fresh-token")
	srv.allow("fresh-token")
	clk.Step(time.Second) // the backoff's most
	eventually(t, "the rotated token to serve", func() bool {
		resp, err := noDeadlineGet(t, v, srv.URL()+"/x")
		return err == nil && resp.StatusCode == http.StatusOK
	})
	if got := calls.Load(); got > 4 {
		t.Errorf("handler called %d times, want at most one per backoff", got)
	}
}

// gate holds the server's requests until it has n of them, then lets them
// all go at once.
type gate struct {
	n       int
	mu      sync.Mutex
	arrived int
	open    chan struct{}
}

func newGate(n int) *gate { return &gate{n: n, open: make(chan struct{})} }

func (g *gate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.arrived++
		if g.arrived == g.n {
			close(g.open)
		}
		g.mu.Unlock()
		<-g.open
		next.ServeHTTP(w, r)
	})
}

// Many requests in flight meet the 401 of one fresh credential: it counts
// as one strike, not one per request. The next credential serves and
// clears the strike, so an ordinary revocation after it is a silent
// re-login, never a LoginError.
func TestOneRejectedCredentialIsOneStrike(t *testing.T) {
	const inFlight = 8
	v, srv, iss := issuingVault(t, Options{}, "", login.Backoff(20*time.Millisecond, time.Second))
	g := newGate(inFlight)
	srv.srv.Config.Handler = g.wrap(srv.srv.Config.Handler)
	first := mustSelect(t, v)
	srv.revoke(first.Info.Token) // revoked before its first use

	var wg sync.WaitGroup
	errs := make(chan error, inFlight)
	for range inFlight {
		wg.Go(func() {
			resp, err := noDeadlineGet(t, v, srv.URL()+"/x")
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %s", resp.Status)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a caller saw %v: one revoked credential must not make the handler back off", err)
		}
	}
	h := first.owner
	v.mu.Lock()
	strikes, outcome, retryAt := h.strikes, h.outcome, h.retryAt
	v.mu.Unlock()
	if strikes != 0 || outcome != nil || !retryAt.IsZero() {
		t.Errorf("after a credential served: strikes %d, outcome %v, retryAt %v; want none", strikes, outcome, retryAt)
	}

	// An ordinary revocation of the serving credential.
	srv.revoke(iss.latest())
	if resp, err := noDeadlineGet(t, v, srv.URL()+"/x"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET after an ordinary revocation: %v %v, want a silent re-login", resp, err)
	}
}

// A handler whose every credential is rejected before it serves backs off
// after the second; a credential that then serves clears the backoff, so
// the next failure starts again from the initial delay.
func TestServingCredentialClearsStrikesAndBackoff(t *testing.T) {
	v, srv, _ := issuingVault(t, Options{}, "", login.Backoff(20*time.Millisecond, 10*time.Second))
	srv.down.Store(true)
	for range 6 { // strikes, and the backoff grows
		_, _ = noDeadlineGet(t, v, srv.URL()+"/x")
		time.Sleep(5 * time.Millisecond)
	}
	srv.down.Store(false)
	eventually(t, "the vault to serve again", func() bool {
		resp, err := noDeadlineGet(t, v, srv.URL()+"/x")
		return err == nil && resp.StatusCode == http.StatusOK
	})
	h := mustSelect(t, v).owner
	v.mu.Lock()
	strikes, next := h.strikes, h.backoff.Duration
	v.mu.Unlock()
	if strikes != 0 || next != 20*time.Millisecond {
		t.Errorf("after a credential served: %d strikes, next backoff %v; want 0 and the initial 20ms", strikes, next)
	}
}

// A LoginError leads with a 401 only when that rejection is what emptied
// the vault. A credential that served after it, then expired while its
// handler's store was down, is what the error is about. Before, the vault
// kept the last rejection for good, and the error opened with "the last
// one was rejected with 401 Unauthorized" hours after a credential had
// replaced it, pointing at the server's authenticator for a store outage.
func TestLoginErrorForgetsARejectionOnceACredentialReplacedIt(t *testing.T) {
	v, clk := testVault(t, Options{})
	v.core.jitter = func(int64) int64 { return 0 }
	h := &counter{lifetime: time.Hour, now: clk.Now}
	v.OnLogin(h.login, login.ID("h"), login.Retries(0))
	reject(v, mustSelect(t, v))
	clk.Step(time.Second) // the login floor
	c := mustSelect(t, v)
	v.served(c)
	h.failWith(errors.New("store down"))
	v.mu.Lock()
	c.owner.refreshAt = time.Time{} // no refresh: the credential expires while it serves
	v.mu.Unlock()
	clk.Step(2 * time.Hour)

	le := selectErr(t, v)
	var unauthorized *UnauthorizedError
	if errors.As(le, &unauthorized) || strings.Contains(le.Error(), "rejected") || !strings.Contains(le.Error(), "store down") {
		t.Errorf("LoginError = %v\nwant the store's error, not the 401 of a credential replaced since", le)
	}
}
