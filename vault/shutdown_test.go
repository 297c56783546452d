package vault

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
)

// The requests a program sends while it stops (a manager's last events, its
// lease) still get a credential: Shutdown closes the vault only once they
// have stopped. Close would have failed them with ErrClosed.
func TestShutdownServesUntilRequestsStop(t *testing.T) {
	synctest.Test(t, testShutdownServesUntilRequestsStop)
}

// testShutdownServesUntilRequestsStop is its body, in a synctest bubble: Shutdown
// waits for a quiet quarter second, which a busy machine's gap between two
// requests 50 ms apart could be on a real clock.
func testShutdownServesUntilRequestsStop(t *testing.T) {
	v := New(Options{NoFallback: true})
	defer v.Close()
	v.OnLogin((&counter{}).login)
	mustSelect(t, v)

	var served, refused atomic.Int64
	stop := make(chan struct{})
	requests := make(chan struct{})
	go func() { // a request every 50 ms for about 600 ms
		defer close(requests)
		for i := 0; i < 12; i++ {
			if _, err := v.Select(context.Background()); err != nil {
				refused.Add(1)
			} else {
				served.Add(1)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	if err := v.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	took := time.Since(start)
	close(stop)
	<-requests
	if refused.Load() != 0 || served.Load() < 10 {
		t.Errorf("served %d, refused %d requests during Shutdown: want every one served", served.Load(), refused.Load())
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("Shutdown took %v: want it to wait for the requests to stop (~600 ms), then about a quarter second", took)
	}
	if _, err := v.Select(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Select() after Shutdown = %v, want ErrClosed", err)
	}
}

// A quiet vault closes after a quarter second.
func TestShutdownOfAQuietVault(t *testing.T) {
	synctest.Test(t, testShutdownOfAQuietVault)
}

// testShutdownOfAQuietVault is its body, in a synctest bubble, where the quarter second is exact.
func testShutdownOfAQuietVault(t *testing.T) {
	v := New(Options{NoFallback: true})
	start := time.Now()
	if err := v.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Shutdown of an idle vault took %v", took)
	}
	if !isClosed(v) {
		t.Error("the vault is not closed after Shutdown")
	}
}

// keepAsking selects from v every 10 ms until the returned stop is called,
// which waits for the asking to end.
func keepAsking(v *Vault) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(10 * time.Millisecond):
				_, _ = v.Select(context.Background())
			}
		}
	}()
	return func() { close(quit); <-done }
}

// ctx bounds the wait, and the vault is closed all the same; requests that
// never stop are waited for five seconds at most.
func TestShutdownIsBounded(t *testing.T) {
	synctest.Test(t, testShutdownIsBounded)
}

// testShutdownIsBounded is its body, in a synctest bubble, where
// shutdownMax is exact.
func testShutdownIsBounded(t *testing.T) {
	v := New(Options{NoFallback: true})
	v.OnLogin((&counter{}).login)
	stop := keepAsking(v)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := v.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown(ctx) = %v, want the context's error", err)
	}
	if !isClosed(v) {
		t.Error("the vault is not closed after Shutdown's context ended")
	}

	w := New(Options{NoFallback: true})
	w.OnLogin((&counter{}).login)
	stopW := keepAsking(w)
	start := time.Now()
	err := w.Shutdown(context.Background())
	took := time.Since(start)
	stopW()
	if err != nil || took < shutdownMax || took > shutdownMax+2*time.Second {
		t.Errorf("Shutdown under endless requests = %v after %v, want nil after %v", err, took, shutdownMax)
	}
}

// SetDefault gives Default a logger and keeps what was registered with the
// package-level OnLogin (in an init function, say). Before, Default could
// not be given a logger or a registerer at all.
func TestSetDefaultKeepsRegisteredHandlers(t *testing.T) {
	saved := Default
	Default = New(Options{NoFallback: true})
	t.Cleanup(func() {
		Default.Close()
		Default = saved
	})
	OnLogin((&counter{}).login, login.ID("registered-at-init"))
	old := Default
	var logs testlog.Buffer
	v := SetDefault(Options{NoFallback: true, Logger: logs.Logger(1)})
	if Default != v || v == old {
		t.Fatal("SetDefault did not replace Default")
	}
	if !isClosed(old) {
		t.Error("the old Default is not closed")
	}
	if c := mustSelect(t, v); c.Handler != "registered-at-init" {
		t.Errorf("Select() = %v, want the handler registered before SetDefault", c)
	}
	if !strings.Contains(logs.String(), "registered-at-init") {
		t.Errorf("the new Default's logger got nothing about its handler:\n%s", logs.String())
	}
}

// A vault closed before or during Shutdown (a deferred Close beside it,
// SetDefault closing the old Default) has nothing left to serve: Shutdown
// returns at once, even while requests keep coming, which all get
// ErrClosed. Before, it waited for them to stop, five seconds under steady
// traffic, holding up the program's exit.
func TestShutdownOfAClosedVaultReturnsAtOnce(t *testing.T) {
	for _, when := range []string{"before", "during"} {
		// In a synctest bubble: "at once" is against Shutdown's five
		// seconds of waiting for requests, and a busy machine's Close may
		// take a good part of that on a real clock.
		t.Run(when, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := New(Options{NoFallback: true})
				v.OnLogin((&counter{}).login)
				mustSelect(t, v)
				stop := keepAsking(v) // requests that never stop
				defer stop()

				if when == "before" {
					v.Close()
				}
				start := time.Now()
				shut := make(chan error, 1)
				go func() { shut <- v.Shutdown(context.Background()) }()
				if when == "during" {
					time.Sleep(50 * time.Millisecond) // Shutdown waits for the requests to stop
					start = time.Now()
					v.Close()
				}
				select {
				case err := <-shut:
					if took := time.Since(start); err != nil || took > 2*time.Second {
						t.Errorf("Shutdown() = %v after %v from Close, want nil at once", err, took)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Shutdown did not return")
				}
			})
		})
	}
}

// SetDefault given the registerer the Default it replaces uses (called
// twice, as tests of a program's main do) leaves the new Default's metrics
// registered. Before, the new vault's registration failed (the old one's
// metrics were still there) and closing the old one then took them away.
func TestSetDefaultAgainKeepsItsMetrics(t *testing.T) {
	saved := Default
	Default = New(Options{NoFallback: true})
	t.Cleanup(func() {
		Default.Close()
		Default = saved
	})
	reg := prometheus.NewPedanticRegistry()
	SetDefault(Options{NoFallback: true, Registerer: reg})
	var logs testlog.Buffer
	v := SetDefault(Options{NoFallback: true, Registerer: reg, Logger: logs.Logger(0)})
	v.OnLogin((&counter{}).login, login.ID("h"))
	mustSelect(t, v)
	if n := testutil.CollectAndCount(reg, "authvault_logins_total"); n != 1 {
		t.Errorf("authvault_logins_total has %d series after a login, want 1:\n%s", n, logs.String())
	}
}
