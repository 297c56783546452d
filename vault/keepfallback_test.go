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
	testingclock "k8s.io/utils/clock/testing"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// fallbackOf registers counters as fallback handlers of the given IDs.
func fallbackOf(ids []string, cs ...*counter) []login.Registration {
	var regs []login.Registration
	for i, c := range cs {
		regs = append(regs, login.Registration{Handler: c.login, Options: []login.Option{login.ID(ids[i])}})
	}
	return regs
}

// unprovisioned is a login handler of one's own that gives nothing until
// gives is set (its secret store is not provisioned yet), then what its
// counter gives; asked counts its calls either way.
type unprovisioned struct {
	counter
	gives atomic.Bool
	asked atomic.Int64
}

func (u *unprovisioned) login(ctx context.Context) (*login.ConnectionInfo, error) {
	u.asked.Add(1)
	if !u.gives.Load() {
		return nil, nil
	}
	return u.counter.login(ctx)
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
	mine := &unprovisioned{counter: counter{server: "https://mine.example"}}
	v.OnLogin(mine.login, login.ID("mine"))

	if c := mustSelect(t, v); c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v while mine gives nothing, want the fallback's", c)
	}
	// Else mine's first login may end after the Refresh below, and wait
	// for its backoff on a clock that no longer moves.
	eventually(t, "mine's first login to end", func() bool { return idle(v) })
	mine.gives.Store(true)
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
	for _, h := range v.core.active() {
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
	mine := &unprovisioned{counter: counter{server: "https://mine.example"}}
	v.OnLogin(mine.login, login.ID("mine"))
	if c := mustSelect(t, v); c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v while mine gives nothing, want the fallback's", c)
	}
	eventually(t, "mine's first login to end", func() bool { return mine.asked.Load() == 1 && idle(v) })
	mine.gives.Store(true)
	deadline := time.Now().Add(testwait.Hang)
	for mustSelect(t, v).Handler != "mine" {
		if time.Now().After(deadline) {
			t.Fatalf("mine was asked %d times in %v of its backoff passing; its credential never served", mine.asked.Load(), testwait.Hang)
		}
		clk.Step(time.Second)
		time.Sleep(time.Millisecond)
	}
}

// anHour steps clk through an hour of ten-second steps, each once what the
// last one started has run or waits on clk: call it in a synctest bubble.
func anHour(clk *testingclock.FakeClock) {
	for range 360 {
		clk.Step(10 * time.Second)
		synctest.Wait()
	}
}

// Under KeepFallback, a handler of one's own that never gives a credential
// (one that gives nothing, one that always fails) costs about one call per
// BackoffMax (1 min) while the fallback serves, not a login per publish:
// over an hour, each fallback refresh republishes, and each publish asks
// the handlers above the fallback again.
func TestKeepFallbackRetriesStayBoundedOverAnHour(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{{"gives nothing", nil}, {"always fails", errors.New("store down")}} {
		// In a bubble, so that each step's logins have run before the next
		// step (synctest.Wait), however slow the machine: a login a step
		// started late would arm its next backoff late, and fewer calls
		// would fit in the hour.
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30, lifetime: 10 * time.Minute}
				v, clk := testVault(t, Options{KeepFallback: true, Fallback: fallbackOf([]string{"kubeconfig"}, kubeconfig)})
				kubeconfig.now = clk.Now
				var calls atomic.Int64
				v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
					calls.Add(1)
					return nil, tc.err
				}, login.ID("mine"), login.Retries(3))
				if c := selectAdvancing(t, v, clk, 100*time.Millisecond); c.Handler != "kubeconfig" {
					t.Fatalf("Select() = %v, want the fallback's", c)
				}
				anHour(clk)
				// Backoff 1 s doubling to 1 min (±20 %): about 60 calls.
				t.Logf("mine: %d calls, the fallback: %d", calls.Load(), kubeconfig.calls.Load())
				if n := calls.Load(); n < 20 || n > 90 {
					t.Errorf("mine was called %d times in an hour, want about 60", n)
				}
				if n := kubeconfig.calls.Load(); n > 10 {
					t.Errorf("the fallback was called %d times in an hour for tokens of 10 min, want at most 10", n)
				}
			})
		})
	}
}

// The quickstart run without $SECRET_STORE: its handler gives nothing, for
// good, and is asked again every minute while the fallback serves. That
// it gave nothing is said at INFO once; the retries that give nothing
// again are at V(1). Before, each said "logging in" and "login gave no
// credential" at INFO: two lines a minute for the life of the process.
func TestAHandlerThatKeepsGivingNothingIsSaidOnce(t *testing.T) {
	synctest.Test(t, testAHandlerThatKeepsGivingNothingIsSaidOnce)
}

// testAHandlerThatKeepsGivingNothingIsSaidOnce is its body, in a synctest bubble.
func testAHandlerThatKeepsGivingNothingIsSaidOnce(t *testing.T) {
	var logs testlog.Buffer
	kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30}
	v, clk := testVault(t, Options{KeepFallback: true, Logger: logs.Logger(1),
		Fallback: fallbackOf([]string{"kubeconfig"}, kubeconfig)})
	mine := &unprovisioned{counter: counter{server: "https://mine.example"}}
	v.OnLogin(mine.login, login.ID("mine"))
	selectAdvancing(t, v, clk, 100*time.Millisecond)
	// Ten minutes: about eight more logins. Each step's logins run before
	// the next step (synctest.Wait): idle alone, polled right after a
	// step, may hold before the step's timer has started any login.
	for range 60 {
		clk.Step(10 * time.Second)
		synctest.Wait()
	}

	count := func(msg string) (info, v1 int) {
		for _, line := range logLines(&logs, msg) {
			switch {
			case !strings.Contains(line, `"handler"="mine"`):
			case strings.Contains(line, `"level"=0`):
				info++
			case strings.Contains(line, `"level"=1`):
				v1++
			}
		}
		return info, v1
	}
	for _, msg := range []string{"logging in", "login gave no credential"} {
		if info, v1 := count(msg); info != 1 || v1 < 5 {
			t.Errorf("%q for mine: %d at INFO, %d at V(1); want 1 at INFO, the retries at V(1):\n%s", msg, info, v1, logs.String())
		}
	}

	// Once it gives a credential, that is at INFO again.
	mine.gives.Store(true)
	for range 12 {
		clk.Step(10 * time.Second)
		synctest.Wait()
	}
	if info, _ := count("logged in"); info != 1 {
		t.Errorf("%d INFO lines say mine logged in, want 1:\n%s", info, logs.String())
	}
	if c := mustSelect(t, v); c.Handler != "mine" {
		t.Errorf("Select() = %v, want mine's", c)
	}
}

// A handler of one's own that fails (its store is down) rather than giving
// nothing: the fallback serves while it backs off, it is retried, and it
// takes over once it heals, whatever its Priority against the fallback's.
func TestKeepFallbackServesWhileARegisteredHandlerFails(t *testing.T) {
	kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30}
	v, clk := testVault(t, Options{KeepFallback: true, Fallback: fallbackOf([]string{"kubeconfig"}, kubeconfig)})
	mine := &counter{server: "https://mine.example", priority: -10}
	mine.failWith(errors.New("store down"))
	v.OnLogin(mine.login, login.ID("mine"), login.Retries(1))

	if c := selectAdvancing(t, v, clk, 100*time.Millisecond); c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v while mine fails, want the fallback's", c)
	}
	eventually(t, "mine's retry to fail", func() bool {
		clk.Step(100 * time.Millisecond) // its backoff
		return mine.calls.Load() >= 2 && idle(v)
	})
	if le := loginErrorText(v); !strings.Contains(le, `handler "mine": store down`) {
		t.Errorf("the vault's LoginError would be %s, want mine's error", le)
	}
	if c := mustSelect(t, v); c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v while mine backs off, want the fallback's", c)
	}
	mine.heal()
	deadline := time.Now().Add(testwait.Hang)
	for mustSelect(t, v).Handler != "mine" {
		if time.Now().After(deadline) {
			t.Fatalf("mine was called %d times; its credential never served after it healed", mine.calls.Load())
		}
		clk.Step(time.Second)
		time.Sleep(time.Millisecond)
	}
}

// loginErrorText is the text of the LoginError v would give now.
func loginErrorText(v *Vault) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.core.loginError(v.clock.Now(), nil).Error()
}

// When the registered handler's only credential is revoked and a fallback
// serves meanwhile, the log says the credential was invalidated before it
// says the fallback serves: before, "using a fallback" came first, and
// read as if the fallback had been chosen for no reason.
func TestRevocationIsLoggedBeforeTheFallbackThatServes(t *testing.T) {
	var logs testlog.Buffer
	kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30}
	v, _ := testVault(t, Options{KeepFallback: true, Logger: logs.Logger(0),
		Fallback: fallbackOf([]string{"kubeconfig"}, kubeconfig)})
	mine := &counter{server: "https://mine.example"}
	v.OnLogin(mine.login, login.ID("mine"))
	first := mustSelect(t, v)
	if first.Handler != "mine" {
		t.Fatalf("Select() = %v, want mine's credential", first)
	}
	eventually(t, "every first login's end", func() bool { return idle(v) })
	block := errors.New("store unreachable")
	mine.fail.Store(&block) // its re-login fails: the fallback serves
	before := len(logs.String())
	reject(v, first)
	eventually(t, "the fallback serving", func() bool { return strings.Contains(logs.String()[before:], "using a fallback") })
	invalidated, fallback := -1, -1
	for i, line := range strings.Split(logs.String()[before:], "\n") {
		switch {
		case invalidated < 0 && strings.Contains(line, `"msg"="credential invalidated"`):
			invalidated = i
		case fallback < 0 && strings.Contains(line, "using a fallback"):
			fallback = i
		}
	}
	if invalidated < 0 || fallback < invalidated {
		t.Errorf("\"credential invalidated\" at line %d, \"using a fallback\" at %d: want the loss first\n%s", invalidated, fallback, logs.String())
	}
}

// A handler registered while a fallback's credential serves, that gives
// nothing, does not make the vault say it has no usable credential: the
// fallback's still serves.
func TestNoUsableCredentialIsNotSaidWhileOneServes(t *testing.T) {
	var logs testlog.Buffer
	kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30}
	v, _ := testVault(t, Options{FirstLoginWait: -1, Logger: logs.Logger(0), Fallback: fallbackOf([]string{"kubeconfig"}, kubeconfig)})
	if c := mustSelect(t, v); c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v, want the fallback's", c)
	}
	var asked atomic.Int32
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { asked.Add(1); return nil, nil }, login.ID("mine"))
	v.Refresh()
	eventually(t, "mine's login to end", func() bool { return asked.Load() > 0 && idle(v) })
	if strings.Contains(logs.String(), `"msg"="no usable credential"`) {
		t.Errorf("said no usable credential while the fallback's serves:\n%s", logs.String())
	}
}
