package vault

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// zapOutput is what controller-runtime's zap logger writes, as an operator
// sets it up (ctrl.SetLogger(zap.New())): JSON lines at INFO, with a stack
// trace on every line at error level. It is safe for concurrent use.
type zapOutput struct{ testlog.Writer }

// logger is the production zap logger of controller-runtime writing into z.
func (z *zapOutput) logger() logr.Logger { return crzap.New(crzap.WriteTo(z)) }

// lines are the lines written so far, each decoded.
func (z *zapOutput) lines(t *testing.T) []zapLine {
	t.Helper()
	var lines []zapLine
	for _, raw := range strings.Split(strings.TrimSpace(z.String()), "\n") {
		if raw == "" {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(raw), &fields); err != nil {
			t.Fatalf("a line that is not JSON: %s", raw)
		}
		lines = append(lines, zapLine{raw: raw, fields: fields})
	}
	return lines
}

type zapLine struct {
	raw    string
	fields map[string]any
}

func (l zapLine) field(key string) string {
	s, _ := l.fields[key].(string)
	return s
}

// A login that fails for a reason outside the process (a file missing, a
// network error, a token the server refuses) is one line: at INFO with the
// error under "error", naming the file, and no stack trace. With zap at
// error level, controller-runtime's logger added a stack trace of the
// vault's login goroutine to every such line, which says nothing about a
// file or a plugin. A handler that panics is a bug in the process: that is
// at error level.
//
// In a synctest bubble: the vault logs in again by itself after a failed
// round (secret-store after 1 ms, kubeconfig after 1 s), so on a real
// clock the lines the test reads depend on how long it took to read them.
// In the bubble no time passes while the vault's goroutines run, and the
// next round waits on a timer that no one lets fire.
func TestExpectedLoginFailuresLogNoStack(t *testing.T) {
	synctest.Test(t, testExpectedLoginFailuresLogNoStack)
}

func testExpectedLoginFailuresLogNoStack(t *testing.T) {
	var out zapOutput
	v := New(Options{NoFallback: true, Logger: out.logger()})
	defer v.Close()
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: missing}), login.ID("kubeconfig"))
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { return nil, refused },
		login.ID("secret-store"), login.Retries(1), login.Backoff(time.Millisecond, time.Millisecond))
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { panic("a bug") },
		login.ID("buggy"), login.Retries(0))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := v.Select(ctx); err == nil {
		t.Fatal("Select() succeeded, want a LoginError")
	}
	synctest.Wait() // every login's end: the next rounds wait on their backoff
	if !idle(v) {
		t.Fatal("a login still runs once every goroutine of the vault waits")
	}

	var kubeconfig, store, buggy []zapLine
	for _, line := range out.lines(t) {
		switch line.field("handler") {
		case "kubeconfig":
			kubeconfig = append(kubeconfig, line)
		case "secret-store":
			store = append(store, line)
		case "buggy":
			buggy = append(buggy, line)
		}
	}
	for _, line := range append(kubeconfig, store...) {
		if line.field("level") != "info" || line.fields["stacktrace"] != nil {
			t.Errorf("a failure outside the process logged at %q with a stack: %s", line.field("level"), line.raw)
		}
	}
	failed := func(lines []zapLine) []zapLine {
		var got []zapLine
		for _, l := range lines {
			if l.field("error") != "" {
				got = append(got, l)
			}
		}
		return got
	}
	if got := failed(kubeconfig); len(got) != 1 || !strings.Contains(got[0].field("error"), missing) {
		t.Errorf("kubeconfig's failure lines = %v, want one that names %s", got, missing)
	}
	if got := failed(store); len(got) != 2 || !strings.Contains(got[0].field("error"), "connection refused") {
		t.Errorf("secret-store's failure lines = %v, want two (an attempt and its retry) with the network error", got)
	}
	if got := failed(buggy); len(got) != 1 || got[0].field("level") != "error" {
		t.Errorf("buggy's failure lines = %v, want one at error level: a panic is a bug in the process", got)
	}
}

// Two new credentials in a row that the server rejects before they served
// (an authenticator outage, a handler minting bad tokens): the line that
// says so is a refusal from outside the process, without a stack.
func TestRejectedAtOnceLogsNoStack(t *testing.T) {
	var out zapOutput
	v, clk := testVault(t, Options{Logger: out.logger()})
	v.OnLogin((&counter{}).login, login.ID("h"), login.Retries(0))
	reject(v, mustSelect(t, v))
	clk.Step(time.Second) // past the login floor
	reject(v, mustSelect(t, v))

	var found bool
	for _, line := range out.lines(t) {
		if !strings.Contains(line.field("msg"), "rejected") {
			continue
		}
		found = true
		if line.field("level") != "info" || line.fields["stacktrace"] != nil || !strings.Contains(line.field("error"), "401") {
			t.Errorf("the rejection's line = %s, want it at INFO with the 401 and no stack", line.raw)
		}
	}
	if !found {
		t.Errorf("no line says the server rejected h's credentials:\n%s", out.String())
	}
}

// A LoginError names what failed, and only that: a handler that gave
// nothing beside one that failed is counted, not described, and its state
// is logged at V(1) when a caller gets the error. Before, the message
// named every handler and its "next login", four of them in the
// quickstart, for 600 bytes and more in every line that printed it.
func TestLoginErrorNamesWhatFailedOthersAtV1(t *testing.T) {
	var logs testlog.Buffer
	v, _ := testVault(t, Options{Logger: logs.Logger(1), KeepFallback: true, Fallback: []login.Registration{
		{Handler: func(context.Context) (*login.ConnectionInfo, error) {
			return nil, login.Permanent(errors.New("piggyback: kubeconfig /etc/ops/kubeconfig: no such file or directory"))
		}, Options: []login.Option{login.ID("kubeconfig /etc/ops/kubeconfig")}},
		{Handler: nothing, Options: []login.Option{login.ID("in-cluster service account")}},
		{Handler: nothing, Options: []login.Option{login.ID("kubeconfig ~/.kube/config")}},
	}})
	v.OnLogin(nothing, login.ID("secret-store"))

	le := selectErr(t, v)
	msg := le.Error()
	if !strings.Contains(msg, `handler "kubeconfig /etc/ops/kubeconfig": piggyback: kubeconfig /etc/ops/kubeconfig: no such file`) {
		t.Errorf("LoginError = %s, want it to name the failed handler and its error", msg)
	}
	for _, other := range []string{"secret-store", "in-cluster service account", "~/.kube/config"} {
		if strings.Contains(msg, other) {
			t.Errorf("LoginError = %s, want no word of %q, which gave nothing", msg, other)
		}
	}
	if !strings.Contains(msg, "3 other handlers gave nothing") {
		t.Errorf("LoginError = %s, want it to count the handlers that gave nothing", msg)
	}
	if len(msg) > 250 {
		t.Errorf("LoginError is %d bytes, want at most 250: %s", len(msg), msg)
	}
	lines := logLines(&logs, "no usable credential")
	if len(lines) != 1 || !strings.Contains(lines[0], `"level"=1`) {
		t.Fatalf("lines on the LoginError = %q, want one at V(1)", lines)
	}
	for _, id := range []string{"secret-store", "in-cluster service account", "kubeconfig ~/.kube/config", "kubeconfig /etc/ops/kubeconfig"} {
		if !strings.Contains(lines[0], id) {
			t.Errorf("the V(1) line lacks handler %q: %s", id, lines[0])
		}
	}
}

// nothing is a handler with nothing to offer.
func nothing(context.Context) (*login.ConnectionInfo, error) { return nil, nil }

// A LoginError promises a next login only when one is to come: a caller
// that waited past a failed handler's backoff (another handler kept the
// login going) is not told of a login in the past, and a handler that gave
// nothing is given no next login at all: asking it again gives nothing
// again. Before: "(next login at …)" for each, times long gone included.
func TestLoginErrorPromisesNoLoginInThePast(t *testing.T) {
	v, clk := testVault(t, Options{MaxWait: 10 * time.Second, FirstLoginWait: -1})
	broken := &counter{}
	broken.failWith(errors.New("secret store unreachable"))
	v.OnLogin(broken.login, login.ID("broken"), login.Retries(0))
	v.OnLogin(nothing, login.ID("empty"))
	slow := &counter{block: make(chan struct{})} // logs in until the test ends
	v.OnLogin(slow.login, login.ID("slow"))

	type result struct{ err error }
	done := make(chan result, 1)
	go func() {
		_, err := v.Select(context.Background())
		done <- result{err}
	}()
	eventually(t, "broken's and empty's logins to end", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		b, e := v.core.lookup("broken"), v.core.lookup("empty")
		return b.outcome != nil && !b.running && e.outcome != nil && !e.running
	})
	if now := loginErrorText(v); !strings.Contains(now, "secret store unreachable (next login at ") {
		t.Errorf("LoginError while broken backs off = %s, want its next login", now)
	}
	deadline := time.Now().Add(testwait.Hang)
	var r result
	for r.err == nil {
		select {
		case r = <-done:
		case <-time.After(time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("Select() did not return after MaxWait")
			}
			clk.Step(time.Second)
		}
	}
	var le *LoginError
	if !errors.As(r.err, &le) || !errors.Is(le, ErrMaxWait) {
		t.Fatalf("Select() error = %v, want a LoginError wrapping ErrMaxWait", r.err)
	}
	if msg := le.Error(); strings.Contains(msg, "next login") || !strings.Contains(msg, "secret store unreachable") {
		t.Errorf("LoginError = %s, want broken's error and no next login: its time has passed", msg)
	}
}

// Under KeepFallback the fallback handlers log in beside one's own, but a
// person reading the log at INFO sees one's own handler only while it has
// a credential: the fallbacks' logins, their ends and their refreshes are
// at V(1). Before, three fallbacks said "logging in" and "logged in" (or
// "gave no credential") at INFO, and one that refreshes (the in-cluster
// token, every minute) said it again and again, while they served nothing.
func TestKeepFallbackLogsTheFallbacksAtV1WhileOwnServes(t *testing.T) {
	var logs testlog.Buffer
	kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30}
	sa := &counter{server: "https://sa.example", priority: 20}
	v, clk := testVault(t, Options{KeepFallback: true, Logger: logs.Logger(1),
		Fallback: append(fallbackOf([]string{"kubeconfig", "service account"}, kubeconfig, sa),
			login.Registration{Handler: nothing, Options: []login.Option{login.ID("home kubeconfig")}})})
	mine := &counter{server: "https://mine.example", lifetime: time.Hour}
	mine.now = clk.Now
	v.OnLogin(mine.login, login.ID("mine"))
	if c := selectAdvancing(t, v, clk, 100*time.Millisecond); c.Handler != "mine" {
		t.Fatalf("Select() = %v, want mine's", c)
	}
	eventually(t, "every first login's end", func() bool { return idle(v) })
	v.Refresh() // the fallbacks' refreshes too
	clk.Step(2 * time.Second)
	eventually(t, "the refreshes", func() bool { return kubeconfig.calls.Load() >= 2 && sa.calls.Load() >= 2 && idle(v) })

	var info, v1 int
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, `"kubeconfig"`) && !strings.Contains(line, `"service account"`) && !strings.Contains(line, `"home kubeconfig"`) {
			continue
		}
		if strings.Contains(line, `"level"=1`) {
			v1++
		} else {
			info++
			t.Errorf("a fallback's line at INFO while mine serves: %s", line)
		}
	}
	if v1 < 6 {
		t.Errorf("%d V(1) lines of the fallbacks, want their logins and ends:\n%s", v1, logs.String())
	}
	mineAtInfo := false
	for _, line := range logLines(&logs, "logged in") {
		mineAtInfo = mineAtInfo || strings.Contains(line, `"handler"="mine"`) && strings.Contains(line, `"level"=0`)
	}
	if !mineAtInfo {
		t.Errorf("no line at INFO says mine logged in:\n%s", logs.String())
	}
}

// The case that must stay at INFO: one's own handler has nothing, and a
// fallback serves; the person reading the log learns which, and sees its
// refreshes, as for any credential that serves.
func TestKeepFallbackLogsTheFallbackAtInfoWhenItServes(t *testing.T) {
	var logs testlog.Buffer
	kubeconfig := &counter{server: "https://kubeconfig.example", priority: 30}
	v, clk := testVault(t, Options{KeepFallback: true, Logger: logs.Logger(1),
		Fallback: fallbackOf([]string{"kubeconfig"}, kubeconfig)})
	v.OnLogin(nothing, login.ID("mine"))
	if c := selectAdvancing(t, v, clk, 100*time.Millisecond); c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v, want the fallback's", c)
	}
	eventually(t, "every first login's end", func() bool { return idle(v) })
	v.Refresh()
	clk.Step(2 * time.Second)
	eventually(t, "the refresh", func() bool { return kubeconfig.calls.Load() >= 2 && idle(v) })

	var served, refreshed bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, `"level"=0`) || !strings.Contains(line, `"kubeconfig"`) {
			continue
		}
		served = served || strings.Contains(line, "using a fallback")
		refreshed = refreshed || strings.Contains(line, `"msg"="logged in"`) && strings.Contains(line, "refresh")
	}
	if !served || !refreshed {
		t.Errorf("INFO says the fallback serves: %t, and its refresh: %t; want both:\n%s", served, refreshed, logs.String())
	}
}

// A 401 from a service behind addonauth (a Bearer challenge whose realm is
// the service's audience) gets an action for a service's caller: a token
// for that audience, and the service's URL as the server. An API server's
// 401, which names no realm, keeps the words for an API server.
func TestActionForAServicesRefusalNamesItsAudience(t *testing.T) {
	service := &UnauthorizedError{Server: "https://reports.team-a.svc", Status: "401 Unauthorized", StatusCode: 401,
		Challenge: `Bearer realm="reports", error="invalid_token", error_description="the token is not meant for this service: its audience is another"`}
	got := action(service)
	for _, want := range []string{`"reports"`, "audience", "handlers.TokenRequest", "Cluster.Server"} {
		if !strings.Contains(got, want) {
			t.Errorf("action(a service's 401) = %q, want it to say %q", got, want)
		}
	}
	for _, challenge := range []string{
		`Bearer realm="reports", error="invalid_token", error_description="addonauth: the token has expired"`, // the right audience
		`Bearer realm="https://kubernetes.default.svc", error="invalid_token", error_description="wrong audience"`,
		`Bearer realm="kubernetes.default", error_description="audience"`,
	} {
		if got := action(&UnauthorizedError{Server: "https://x", StatusCode: 401, Challenge: challenge}); strings.Contains(got, "TokenRequest") {
			t.Errorf("action(%s) = %q: advice to mint a token for what the server asks", challenge, got)
		}
	}
	apiServer := &UnauthorizedError{Server: "https://api.example:6443", Status: "401 Unauthorized", StatusCode: 401}
	if got := action(apiServer); !strings.Contains(got, "authenticator") || strings.Contains(got, "audience") {
		t.Errorf("action(an API server's 401) = %q, want the API server's words", got)
	}
	for challenge, want := range map[string]string{
		`Bearer realm="a"`:                "a",
		`bearer error="x", realm="svc"`:   "svc",
		`Basic realm="kubernetes-master"`: "",
		`Bearer error="invalid_token"`:    "",
		`Bearer realm=""`:                 "",
		`Bearer notrealm="x"`:             "",
	} {
		if got := bearerRealm(challenge); got != want {
			t.Errorf("bearerRealm(%q) = %q, want %q", challenge, got, want)
		}
	}
}
