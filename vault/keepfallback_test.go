package vault

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authvault/authvault/internal/testkit/testlog"
	"github.com/authvault/authvault/login"
)

// fallbackOf registers counters as fallback handlers of the given IDs.
func fallbackOf(ids []string, cs ...*counter) []login.Registration {
	var regs []login.Registration
	for i, c := range cs {
		regs = append(regs, login.Registration{Handler: c.login, Options: []login.Option{login.ID(ids[i])}})
	}
	return regs
}

// "My login, else what the process has": under KeepFallback a registered
// handler of priority 0 serves over a fallback of priority 30, and the
// fallback serves while the registered handler gives nothing. Before
// KeepFallback, registering the fallback by hand beside one's own handler
// gave the fallback the win (30 > 0) and numbered IDs ("kubeconfig#2").
func TestKeepFallbackRanksRegisteredHandlersFirst(t *testing.T) {
	kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30}
	v, clk := testVault(t, Options{KeepFallback: true, FirstLoginWait: -1,
		Fallback: fallbackOf([]string{"kubeconfig"}, kubeconfig)})
	var gives atomic.Bool
	mine := &counter{server: "https://mine.example"}
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		if !gives.Load() {
			return nil, nil
		}
		return mine.login(ctx)
	}, login.ID("mine"))

	if c := mustSelect(t, v); c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v while mine gives nothing, want the fallback's", c)
	}
	gives.Store(true)
	clk.Step(2 * time.Second) // past mine's login floor
	v.Refresh()
	eventually(t, "mine's credential", func() bool { return mine.calls.Load() > 0 && v.snap.Load().size() == 2 })
	for range 20 {
		if c := mustSelect(t, v); c.Handler != "mine" {
			t.Fatalf("Select() = %v, want mine's (priority 0) over the fallback's (priority 30)", c)
		}
	}
	v.mu.Lock()
	var ids []string
	for _, h := range v.activeLocked() {
		ids = append(ids, h.settings.ID)
	}
	v.mu.Unlock()
	if got := strings.Join(ids, ","); got != "mine,kubeconfig" {
		t.Errorf("active handlers = %s, want mine,kubeconfig (no numbered IDs)", got)
	}
}

// Without KeepFallback, a vault whose handlers are registered before its
// first login never makes the fallback handlers: none shows in its metrics,
// and a handler of the same ID as a fallback keeps its ID. Before, every
// fallback handler was made in New: "in-cluster service account#2" for a
// user who registered piggyback.ServiceAccount, and unused series.
func TestRegisteredHandlersLeaveNoFallbackBehind(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	sa := &counter{server: "https://sa.example"}
	v, _ := testVault(t, Options{Registerer: reg, Fallback: fallbackOf([]string{"in-cluster service account"}, &counter{})})
	v.OnLogin(sa.login, login.ID("in-cluster service account"))
	if c := mustSelect(t, v); c.Handler != "in-cluster service account" {
		t.Errorf("Select() = %v, want the registered handler under its own ID", c)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "handler" && l.GetValue() != "in-cluster service account" {
					t.Errorf("%s has a series for handler %q, which never ran", f.GetName(), l.GetValue())
				}
			}
		}
	}
	if n := testutil.CollectAndCount(reg, "authvault_abandoned_calls"); n != 1 {
		t.Errorf("authvault_abandoned_calls has %d series, want 1 (the registered handler's)", n)
	}
}

// Without KeepFallback the fallback still stops once a handler is
// registered, as before.
func TestWithoutKeepFallbackTheFallbackStops(t *testing.T) {
	fb := &counter{server: "https://fallback.example", priority: 30}
	v, _ := testVault(t, Options{Fallback: fallbackOf([]string{"fb"}, fb)})
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { return nil, nil }, login.ID("mine"))
	le := selectErr(t, v)
	if fb.calls.Load() != 0 {
		t.Errorf("the fallback ran %d times beside a registered handler without KeepFallback", fb.calls.Load())
	}
	if !strings.Contains(le.Error(), "mine") || strings.Contains(le.Error(), "fb") {
		t.Errorf("LoginError = %v, want mine's outcome only", le)
	}
}

// The fallback winner is logged when a fallback serves under KeepFallback,
// and not while a registered handler's credential serves.
func TestKeepFallbackLogsWhenTheFallbackServes(t *testing.T) {
	var logs testlog.Buffer
	kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30}
	v, _ := testVault(t, Options{KeepFallback: true, FirstLoginWait: -1, Logger: logs.Logger(0),
		Fallback: fallbackOf([]string{"kubeconfig"}, kubeconfig)})
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { return nil, nil }, login.ID("mine"))
	mustSelect(t, v)
	if !strings.Contains(logs.String(), "using a fallback") || !strings.Contains(logs.String(), `"kubeconfig"`) {
		t.Errorf("no line says the fallback serves:\n%s", logs.String())
	}
}

// A handler of one's own that gave nothing at first (its secret store was
// not provisioned yet) is asked again after its backoff while a fallback
// serves, and takes over once it gives a credential, without a Refresh.
// Before, it was asked again only when the vault ran empty, which a
// fallback that refreshes its own credential never lets happen.
func TestKeepFallbackAsksARegisteredHandlerAgain(t *testing.T) {
	kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30}
	v, clk := testVault(t, Options{KeepFallback: true, FirstLoginWait: -1,
		Fallback: fallbackOf([]string{"kubeconfig"}, kubeconfig)})
	var gives atomic.Bool
	var calls atomic.Int64
	mine := &counter{server: "https://mine.example"}
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		calls.Add(1)
		if !gives.Load() {
			return nil, nil
		}
		return mine.login(ctx)
	}, login.ID("mine"))
	if c := mustSelect(t, v); c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v while mine gives nothing, want the fallback's", c)
	}
	eventually(t, "mine's first login to end", func() bool { return calls.Load() == 1 && idle(v) })
	gives.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for mustSelect(t, v).Handler != "mine" {
		if time.Now().After(deadline) {
			t.Fatalf("mine was asked %d times in 5 s of its backoff passing; its credential never served", calls.Load())
		}
		clk.Step(time.Second)
		time.Sleep(time.Millisecond)
	}
}
