package vault

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
)

// Review of the first-login wait (issue 10): each test shows a problem.

// A caller whose deadline ends while the round's credential is held back
// gets a LoginError that says the fast handler "has not run", when it has
// run and its credential sits in the vault, held for the slow one. The
// error should say that (the credential is there, held for "slow" until
// FirstLoginWait), not send the user hunting for a handler that never ran.
func TestFirstLoginErrorWhileHeldSaysWhy(t *testing.T) {
	v, _ := testVault(t, Options{FirstLoginWait: time.Hour})
	slow := &counter{priority: 30, block: make(chan struct{})}
	defer close(slow.block)
	v.OnLogin(slow.login, login.ID("slow"))
	v.OnLogin((&counter{priority: 20}).login, login.ID("fast"))

	// A first caller starts the round; the one checked here comes once
	// fast's credential is in (held for slow), however long fast's login
	// took on this machine, and its deadline ends while it waits.
	first, stopFirst := context.WithCancel(context.Background())
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		_, _ = v.Select(first)
	}()
	defer func() { stopFirst(); <-firstDone }()
	eventually(t, "the fast handler's credential in the vault", func() bool { return v.snap.Load().size() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := v.Select(ctx)
	var le *LoginError
	if !errors.As(err, &le) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Select() error = %v, want a LoginError with the caller's deadline", err)
	}
	if msg := le.Error(); strings.Contains(msg, `"fast" has not run`) {
		t.Errorf("LoginError = %q: it says fast has not run, while its credential is held back for slow's first attempt", msg)
	}
}

// The FirstLoginWait timer of a round that has ended can still end the
// wait of the next round: its callback checks only v.core.settling, not that it
// is its own round. The window is between the timer firing and its callback
// taking v.mu; the test holds v.mu over it, and runs in it what the vault
// does when the round's last first attempt returns and a new round starts.
func TestFirstLoginStaleTimerKeepsTheNextRound(t *testing.T) {
	v, clk := testVault(t, Options{FirstLoginWait: 3 * time.Second})
	slow := &counter{priority: 30, block: make(chan struct{})}
	defer close(slow.block)
	fast := &counter{priority: 20}
	v.OnLogin(slow.login, login.ID("slow"))
	v.OnLogin(fast.login, login.ID("fast"))
	go func() { _, _ = v.Select(context.Background()) }()
	eventually(t, "fast's credential, held", func() bool { return v.snap.Load().size() == 1 })

	v.mu.Lock()
	slowH, fastH := v.core.lookup("slow"), v.core.lookup("fast")
	clk.Step(3 * time.Second) // round 1's timer fires; its callback waits for v.mu
	// Round 1 ends as when slow's first attempt returns...
	var e effects
	v.core.firstAttemptDone(clk.Now(), slowH, &e)
	v.applyLocked(v.core.seal(e))
	// ...then fast's credential is rejected, and the next Select starts
	// round 2 (fast logs in again; this time it takes a while).
	fast.block = make(chan struct{})
	defer close(fast.block)
	v.pool.releaseRoute(fastH.drop().route)
	v.publishLocked(v.core.creds(), v.core.settling)
	e, _, _, _ = v.core.wanted(clk.Now())
	v.applyLocked(e)
	if !v.core.settling {
		v.mu.Unlock()
		t.Fatal("round 2 does not wait")
	}
	v.mu.Unlock()

	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		v.mu.Lock()
		settling := v.core.settling
		v.mu.Unlock()
		if !settling {
			t.Fatal("round 1's timer ended round 2's wait at once, before its FirstLoginWait or its handlers' first attempts")
		}
		time.Sleep(time.Millisecond)
	}
}

// With fallback handlers, the vault logs which fallback it uses. It logs
// the fast, low one as soon as its credential arrives, though it is held
// and never handed out: with the defaults, the log says "using the
// in-cluster service account" for a process that never sent a request
// there, then the kubeconfig.
func TestFirstLoginLogsOnlyTheFallbackHandedOut(t *testing.T) {
	var logs testlog.Buffer
	high := &counter{priority: 30, server: "https://high.example", block: make(chan struct{})}
	low := &counter{priority: 20, server: "https://low.example"}
	v, _ := testVault(t, Options{Logger: logs.Logger(0), Fallback: []login.Registration{
		{Handler: high.login, Options: []login.Option{login.ID("high")}},
		{Handler: low.login, Options: []login.Option{login.ID("low")}},
	}})
	got := make(chan *Credential, 1)
	go func() { got <- mustSelect(t, v) }()
	eventually(t, "low's credential, held", func() bool { return v.snap.Load().size() == 1 })
	close(high.block)
	if c := <-got; c.Handler != "high" {
		t.Fatalf("Select() = %v, want high's", c)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "using a fallback") && strings.Contains(line, `"low"`) {
			t.Errorf("the log says the vault uses a fallback it never handed out: %s", line)
		}
	}
}

// Namespace is documented as the namespace of the credentials the vault
// hands out now; while the round holds its credentials back it gives the
// held, lower one's, which is not what Select will hand out.
func TestFirstLoginNamespaceOfHeldCredential(t *testing.T) {
	v, _ := testVault(t, Options{FirstLoginWait: time.Hour})
	slow := &counter{priority: 30, block: make(chan struct{})}
	defer close(slow.block)
	v.OnLogin(slow.login, login.ID("slow"))
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: "https://in-cluster.example", Token: "t", Priority: 20, DefaultNamespace: "in-cluster-ns"}, nil
	}, login.ID("fast"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = v.Select(ctx) }()
	eventually(t, "fast's credential, held", func() bool { return v.snap.Load().size() == 1 })
	if ns := v.Namespace(); ns == "in-cluster-ns" {
		t.Errorf("Namespace() = %q while that credential is held back and Select hands out none", ns)
	}
}

// The wait keeps the first request off the lower priority (with the
// defaults: off the in-cluster cluster when --kubeconfig names another).
// A 401 on the higher credential undoes it for good: the lower one serves
// (the transport even replays the rejected request against its server) and
// the higher handler is never run again while the lower one lives, so the
// kubeconfig's cluster is abandoned after one revoked token.
func TestFirstLoginPriorityAfterRejectedHigher(t *testing.T) {
	synctest.Test(t, testFirstLoginPriorityAfterRejectedHigher)
}

// testFirstLoginPriorityAfterRejectedHigher is its body, in a synctest bubble.
func testFirstLoginPriorityAfterRejectedHigher(t *testing.T) {
	v, clk := testVault(t, Options{})
	high := &counter{priority: 30, server: "https://kubeconfig.example"}
	low := &counter{priority: 20, server: "https://in-cluster.example"}
	v.OnLogin(high.login, login.ID("kubeconfig"))
	v.OnLogin(low.login, login.ID("in-cluster"))
	c := mustSelect(t, v)
	if c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v, want the kubeconfig's", c)
	}
	eventually(t, "the round to end", func() bool { return idle(v) })
	if err := v.Invalidate(context.Background(), c, errors.New("401")); err != nil {
		t.Fatal(err)
	}
	// A minute on the vault's clock: far past the login floor and backoff.
	// Each step's logins run before the next step (synctest.Wait), not for
	// a millisecond of a machine that may be busy: a login run late arms
	// its backoff late, and the minute would end before the retry.
	for range 60 {
		mustSelect(t, v)
		clk.Step(time.Second)
		synctest.Wait()
	}
	if n := high.calls.Load(); n < 2 {
		t.Errorf("the kubeconfig handler ran %d time(s) in a minute after its credential was rejected, while Select hands out %v", n, mustSelect(t, v))
	}
}
