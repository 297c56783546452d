package vault

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

// selectInBackground selects with ctx in a goroutine; the result arrives on
// the channel.
func selectInBackground(v *Vault, ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := v.Select(ctx)
		done <- err
	}()
	return done
}

// A caller without a deadline, while a handler fails and retries without
// end, gets the LoginError once it has waited MaxWait on the vault's clock,
// not before; the login goes on, and heals for the next caller.
func TestMaxWaitBoundsACallerWithoutDeadline(t *testing.T) {
	v, clk := testVault(t, Options{})
	boom := errors.New("plugin exited 1")
	h := &counter{}
	h.failWith(boom)
	v.OnLogin(h.login, login.ID("flaky")) // unlimited retries, 1 s backoff doubling to 1 min

	done := selectInBackground(v, context.Background())
	// The caller's MaxWait timer and the handler's retry.
	eventually(t, "the caller to wait", func() bool { return v.waits.waiting.Load() == 1 && clk.Waiters() == 2 })
	clk.Step(defaultMaxWait - time.Millisecond) // the first retry fires, the bound not yet
	// A fired timer leaves the clock's waiters at once: the caller's is
	// still there beside the second retry's.
	eventually(t, "the second attempt", func() bool { return h.calls.Load() == 2 && clk.Waiters() == 2 })
	select {
	case err := <-done:
		t.Fatalf("Select() = %v before MaxWait", err)
	default:
	}

	clk.Step(time.Millisecond)
	var err error
	select {
	case err = <-done:
	case <-time.After(testwait.Hang):
		t.Fatal("Select() still waits at MaxWait")
	}
	var le *LoginError
	if !errors.As(err, &le) || !errors.Is(err, ErrMaxWait) || !errors.Is(err, boom) {
		t.Fatalf("Select() error = %v, want a LoginError wrapping ErrMaxWait and %v", err, boom)
	}
	for _, want := range []string{"waited 1m0s for a credential", `handler "flaky" is still retrying after: plugin exited 1`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("LoginError = %q, want it to contain %q", err, want)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("LoginError = %v wraps context.DeadlineExceeded: the caller's context did not end", err)
	}

	// The login goes on without the caller.
	calls := h.calls.Load()
	clk.Step(defaultMaxWait) // past the retry's backoff, bounded at a minute
	eventually(t, "another attempt", func() bool { return h.calls.Load() > calls })
	h.heal()
	if c := selectAdvancing(t, v, clk, time.Second); c.Handler != "flaky" {
		t.Errorf("Select() = %v, want the healed handler's credential", c)
	}
}

// A caller whose deadline comes before MaxWait gets the LoginError at its
// deadline, with its context's error.
func TestMaxWaitYieldsToAnEarlierDeadline(t *testing.T) {
	v, _ := testVault(t, Options{MaxWait: time.Hour})
	h := &counter{}
	h.failWith(errors.New("plugin exited 1"))
	v.OnLogin(h.login)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := v.Select(ctx)
	// Not before the deadline; after it, only a hang's bound: MaxWait is an
	// hour on a fake clock that stands still.
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond || elapsed > testwait.Hang {
		t.Errorf("Select() returned after %v, want its 50ms deadline", elapsed)
	}
	var le *LoginError
	if !errors.As(err, &le) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrMaxWait) {
		t.Errorf("Select() error = %v, want a LoginError with the caller's deadline, not ErrMaxWait", err)
	}
}

// MaxWait negative: no bound but the caller's context. A caller without a
// deadline waits through ten minutes of failed attempts and gets the
// credential once the handler heals.
func TestMaxWaitNegativeWaitsOn(t *testing.T) {
	v, clk := testVault(t, Options{MaxWait: -1})
	h := &counter{}
	h.failWith(errors.New("plugin exited 1"))
	v.OnLogin(h.login, login.ID("flaky"))

	done := selectInBackground(v, context.Background())
	// No timer but the handler's retry.
	eventually(t, "the caller to wait", func() bool { return v.waits.waiting.Load() == 1 && clk.Waiters() == 1 })
	for range 5 {
		calls := h.calls.Load()
		clk.Step(2 * time.Minute) // past the retry's backoff
		eventually(t, "the next retry", func() bool { return h.calls.Load() > calls && clk.Waiters() == 1 })
	}
	select {
	case err := <-done:
		t.Fatalf("Select() = %v after ten minutes, want it to wait on", err)
	default:
	}
	h.heal()
	clk.Step(2 * time.Minute)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Select() error = %v once the handler healed, want its credential", err)
		}
	case <-time.After(testwait.Hang):
		t.Fatal("Select() still waits after the handler healed")
	}
}

// A client-go request without a deadline, made on the vault's RESTConfig,
// whose credential is revoked while its handler fails from then on, returns
// the LoginError once it has waited MaxWait.
func TestMaxWaitEndsAClientGoRequestWithoutDeadline(t *testing.T) {
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, "")
	srv.allow("good")
	boom := errors.New("secret store unreachable")
	var served atomic.Bool
	v := New(Options{MaxWait: 500 * time.Millisecond})
	t.Cleanup(v.Close)
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		if served.CompareAndSwap(false, true) {
			return &login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "good"}, nil
		}
		return nil, boom
	}, login.ID("store"), login.Backoff(20*time.Millisecond, 100*time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("List() with the good token: %v", err)
	}

	srv.revoke("good")
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(testwait.Hang):
		t.Fatalf("List() without a deadline still waits after %v, want the LoginError after MaxWait (500ms)", testwait.Hang)
	}
	elapsed := time.Since(start)
	var le *LoginError
	if !errors.As(err, &le) || !errors.Is(err, ErrMaxWait) || !errors.Is(err, boom) {
		t.Fatalf("List() error = %v, want a LoginError wrapping ErrMaxWait and %v", err, boom)
	}
	var unauthorized *UnauthorizedError
	if !errors.As(err, &unauthorized) || unauthorized.StatusCode != http.StatusUnauthorized {
		t.Errorf("LoginError = %v, want the 401 of the revoked token as its cause", err)
	}
	// Not before MaxWait. How little after it is the fake clock's business
	// (TestMaxWaitBoundsACallerWithoutDeadline): on a real clock, a busy
	// machine adds what it likes, and the bound here is a hang's.
	if elapsed < 500*time.Millisecond {
		t.Errorf("List() returned after %v, want MaxWait (500ms) and little more", elapsed)
	}
	t.Logf("List() after %v: %v", elapsed.Round(time.Millisecond), err)
}
