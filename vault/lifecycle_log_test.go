package vault

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// logLines are the lines of logs whose message is msg, in order.
func logLines(logs *testlog.Buffer, msg string) []string {
	var got []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg"="`+msg+`"`) {
			got = append(got, line)
		}
	}
	return got
}

// isError tells whether line was logged at error level: funcr gives error
// lines no "level".
func isError(line string) bool { return line != "" && !strings.Contains(line, `"level"=`) }

// reject has the transport's 401 invalidate c.
func reject(v *Vault, c *Credential) {
	v.invalidate(context.Background(), c, unauthorized(c, &http.Response{Status: "401 Unauthorized", StatusCode: http.StatusUnauthorized}), by401)
}

// A run that goes well says so at INFO, once for each event: the first
// login and its end, whose credential serves and until when, a refresh's
// end, the 401 that invalidated a credential, the re-login after it and
// its end. A refresh's start is at V(1) only.
func TestLifecycleIsLoggedAtInfoOnceEach(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(0)})
	v.core.jitter = func(int64) int64 { return 0 }
	h := &counter{lifetime: time.Hour, now: clk.Now}
	v.OnLogin(h.login, login.ID("h"), login.Retries(0))

	first := mustSelect(t, v)
	clk.Step(55 * time.Minute) // inside the refresh window
	eventually(t, "the refresh", func() bool { return current(v, "h") != first })
	refreshed := mustSelect(t, v)
	v.served(refreshed)
	reject(v, refreshed)
	clk.Step(handlerconf.DefaultBackoffInitial) // past the login floor
	mustSelect(t, v)
	eventually(t, "the re-login's end", func() bool { return idle(v) })

	for _, tc := range []struct {
		msg, with string
		want      int
	}{
		{"logging in", `"reason"="first login"`, 1},
		{"logged in", `"reason"="first login"`, 1},
		{"serving", `"handler"="h"`, 1}, // the same handler after the refresh and the re-login
		{"logging in", `"reason"="refresh before expiry"`, 0},
		{"logged in", `"reason"="refresh before expiry"`, 1},
		{"logging in", `"reason"="rejected by the server (401)"`, 1},
		{"logged in", `"reason"="rejected by the server (401)"`, 1},
		{"credential invalidated", `"cause"="vault: https://api.example:6443 answered 401 Unauthorized"`, 1},
	} {
		n := 0
		for _, line := range logLines(&logs, tc.msg) {
			if strings.Contains(line, tc.with) {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("%d INFO lines %q with %s, want %d:\n%s", n, tc.msg, tc.with, tc.want, logs.String())
		}
	}
	for _, line := range logLines(&logs, "logged in") {
		for _, want := range []string{`"handler"="h"`, `"expiration"="2026-`, `"refreshAt"="2026-`, `"fingerprint"=`} {
			if !strings.Contains(line, want) {
				t.Errorf("login's end lacks %s: %s", want, line)
			}
		}
	}
	const serving = `"msg"="serving" "handler"="h" "server"="https://api.example:6443" "priority"=0 "expiration"="2026-01-01 01:00:00 +0000 UTC"`
	if !strings.Contains(logs.String(), serving) {
		t.Errorf("the serving line does not say which handler serves and until when:\n%s", logs.String())
	}
}

// Per-request lines (a credential found expired by Select) are at V(1); so
// is a refresh's start. A 401's invalidation is at INFO (see above).
func TestPerRequestLinesAreAtV1(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(1)})
	v.core.jitter = func(int64) int64 { return 0 }
	h := &counter{lifetime: time.Hour, now: clk.Now}
	v.OnLogin(h.login, login.ID("h"), login.Retries(0))
	c := mustSelect(t, v)
	reject(v, c)
	clk.Step(handlerconf.DefaultBackoffInitial)
	c = mustSelect(t, v)
	v.mu.Lock()
	c.owner.refreshAt = time.Time{} // no refresh: the credential expires while it serves
	v.mu.Unlock()
	clk.Step(2 * time.Hour)
	h.failWith(errors.New("store down"))
	selectErr(t, v)

	for msg, want := range map[string]int{"credential expired": 1} {
		lines := logLines(&logs, msg)
		if len(lines) != want {
			t.Errorf("%d lines %q, want %d:\n%s", len(lines), msg, want, logs.String())
		}
		for _, line := range lines {
			if !strings.Contains(line, `"level"=1`) {
				t.Errorf("a per-request line not at V(1): %s", line)
			}
		}
	}
}

// No log line shows the zero time: a credential that never expires says
// "never", and a time that does not apply is left out.
func TestNoLogLineHasTheZeroTime(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(1)})
	h := &counter{} // never expires
	v.OnLogin(h.login, login.ID("h"), login.Retries(0))
	c := mustSelect(t, v)
	reject(v, c)
	clk.Step(handlerconf.DefaultBackoffInitial)
	mustSelect(t, v)
	h.failWith(errors.New("store down"))
	v.Refresh() // fails: the credential serves on, for ever
	clk.Step(handlerconf.DefaultBackoffInitial)
	eventually(t, "the failed refresh", func() bool { return h.calls.Load() == 3 && idle(v) })

	if strings.Contains(logs.String(), "0001-01-01") {
		t.Errorf("the log shows the zero time:\n%s", logs.String())
	}
	if lines := logLines(&logs, "logged in"); len(lines) == 0 || !strings.Contains(lines[0], `"expiration"="never"`) ||
		strings.Contains(lines[0], "refreshAt") {
		t.Errorf("a login's end = %q, want expiration never and no refreshAt", lines)
	}
	if lines := logLines(&logs, "login failed"); len(lines) != 1 || !strings.Contains(lines[0], `"servesUntil"="never"`) {
		t.Errorf("the failed refresh = %q, want the old credential serving until never", lines)
	}
}

// Inside a handler, logr.FromContext gives the vault's logger with the
// handler, the reason and the attempt.
func TestHandlerLogsThroughItsContext(t *testing.T) {
	var logs testlog.Buffer
	// A real clock: the handler's Temporary delay passes by itself.
	v := New(Options{NoFallback: true, Logger: logs.Logger(0).WithName("authvault")})
	defer v.Close()
	calls := 0
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		calls++
		log, err := logr.FromContext(ctx)
		if err != nil {
			return nil, login.Permanent(err)
		}
		log.Info("asking the token service")
		if calls == 1 {
			return nil, login.Temporary(errors.New("busy"), time.Nanosecond)
		}
		return &login.ConnectionInfo{Server: "https://a", Token: "t"}, nil
	}, login.ID("svc"), login.Retries(1))
	mustSelect(t, v)

	lines := logLines(&logs, "asking the token service")
	if len(lines) != 2 {
		t.Fatalf("%d lines from the handler, want 2:\n%s", len(lines), logs.String())
	}
	for i, line := range lines {
		want := `authvault "level"=0 "msg"="asking the token service" "handler"="svc" "reason"="first login" "attempt"=` +
			string(rune('1'+i))
		if line != want {
			t.Errorf("handler's line %d = %s\nwant %s", i+1, line, want)
		}
	}
}

// A handler that outlives its timeout is named with the timeout, in the
// log and in the LoginError; login.ErrAbandoned still matches. The next
// login, which finds the call still running, names them too.
func TestTimedOutHandlerErrorNamesHandlerAndTimeout(t *testing.T) {
	var logs testlog.Buffer
	v := New(Options{NoFallback: true, Logger: logs.Logger(0)})
	defer v.Close()
	release := make(chan struct{})
	defer close(release) // before Close, which waits for the call
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		<-release // ignores its context
		return nil, nil
	}, login.ID("plugin-kubeconfig"), login.Timeout(20*time.Millisecond), login.Retries(0),
		login.Backoff(time.Millisecond, time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	_, err := v.Select(ctx)
	const want = `handler "plugin-kubeconfig" did not return within 20ms`
	// The caller gets the round's error; on a busy machine it may wake
	// after the next round (1 ms of backoff later) has found the call still
	// running, and get that one's (checked below): the first round's is in
	// the log either way.
	switch {
	case errors.Is(err, errStillRunning):
	case !errors.Is(err, login.ErrAbandoned) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), want):
		t.Errorf("Select() error = %v, want %s, matching login.ErrAbandoned", err, want)
	}
	if n := strings.Count(err.Error(), "plugin-kubeconfig"); n != 1 {
		t.Errorf("Select() error = %v names the handler %d times, want once", err, n)
	}
	eventually(t, "the failed login's line", func() bool { return len(logLines(&logs, "login failed")) > 0 })
	// At INFO with the error: a handler that does not return waits on
	// something outside the process (a plugin, a network).
	if line := logLines(&logs, "login failed")[0]; isError(line) || !strings.Contains(line, `"error"="vault: handler \"plugin-kubeconfig\" did not return within 20ms"`) ||
		!strings.Contains(line, "login.Timeout") {
		t.Errorf("failed login's line = %s, want it at INFO naming the timeout, and login.Timeout as what to look at", line)
	}

	eventually(t, "the next login", func() bool {
		_, err = v.Select(ctx)
		return errors.Is(err, errStillRunning)
	})
	const again = `handler "plugin-kubeconfig" was not called again: its previous call, abandoned after 20ms, has not returned`
	if !errors.Is(err, login.ErrAbandoned) || !strings.Contains(err.Error(), again) {
		t.Errorf("Select() error = %v, want %s, matching login.ErrAbandoned", err, again)
	}
}

// Two new credentials in a row rejected before they served: the failure's
// line says the server answered 401 (at INFO: the refusal comes from
// outside the process), and so does the LoginError, first.
func TestRejectedAtOnceLogsThe401(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(0)})
	v.OnLogin((&counter{}).login, login.ID("h"), login.Retries(0))
	reject(v, mustSelect(t, v))
	clk.Step(handlerconf.DefaultBackoffInitial)
	reject(v, mustSelect(t, v))

	var errs []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"error"=`) {
			errs = append(errs, line)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], `"error"="vault: https://api.example:6443 answered 401 Unauthorized"`) ||
		!strings.Contains(errs[0], `"handler"="h"`) || isError(errs[0]) {
		t.Errorf("failure lines = %q, want one at INFO that says the server answered 401", errs)
	}

	le := selectErr(t, v)
	const head = "vault: no usable credential for https://api.example:6443: the last one was rejected with 401 Unauthorized; "
	if !strings.HasPrefix(le.Error(), head) || !errors.Is(le, errRejectedAtOnce) {
		t.Errorf("LoginError = %v\nwant it to start %q", le, head)
	}
}

// A refresh that gives the credential the vault has (a Secret rewritten
// with the same token) is no failure: not at error level.
func TestUnchangedRefreshIsNotAnError(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(1)})
	h := &counter{}
	h.same.Store(true)
	v.OnLogin(h.login, login.ID("h"), login.Retries(0))
	mustSelect(t, v)
	v.Refresh()
	clk.Step(handlerconf.DefaultBackoffInitial) // past the login floor
	eventually(t, "the refresh", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return errors.Is(v.core.lookup("h").outcome, errUnchanged)
	})
	// Its line is logged once the lock is let go.
	eventually(t, "the refresh's line", func() bool { return len(logLines(&logs, "logged in: the credential is unchanged")) > 0 })

	for _, line := range strings.Split(logs.String(), "\n") {
		if isError(line) {
			t.Errorf("an error line for an unchanged credential: %s", line)
		}
	}
	if lines := logLines(&logs, "logged in: the credential is unchanged"); len(lines) != 1 || !strings.Contains(lines[0], `"level"=1`) {
		t.Errorf("unchanged lines = %q, want one at V(1)", lines)
	}
}

// The vault uses its logger as given: a logger named "authvault" gives
// lines named "authvault", not "authvault.authvault".
func TestVaultUsesItsLoggerAsGiven(t *testing.T) {
	var logs testlog.Buffer
	v, _ := testVault(t, Options{Logger: logs.Logger(1).WithName("authvault")})
	v.OnLogin((&counter{}).login, login.ID("h"))
	reject(v, mustSelect(t, v))
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("log = %q, want a login and an invalidation", lines)
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, `authvault "`) {
			t.Errorf("line %s, want it named authvault", line)
		}
	}
}

// A fallback that serves in the place of registered handlers that give
// nothing (the README's quickstart on a kubeconfig) logs its revocation
// and the login after it at INFO, as a registered handler does: at
// make cluster-revoke, the default level showed nothing.
func TestFallbackServingLogsItsRevocationAtInfo(t *testing.T) {
	var logs testlog.Buffer
	fallback := &counter{}
	v, clk := testVault(t, Options{Logger: logs.Logger(0), KeepFallback: true,
		Fallback: []login.Registration{{Handler: fallback.login, Options: []login.Option{login.ID("kubeconfig")}}}})
	v.core.jitter = func(int64) int64 { return 0 }
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { return nil, nil }, login.ID("secret-store"))
	c := mustSelect(t, v)
	if c.Handler != "kubeconfig" {
		t.Fatalf("Select() = %v, want the fallback's credential", c)
	}
	v.served(c)
	reject(v, c)
	clk.Step(handlerconf.DefaultBackoffInitial)
	if c2 := mustSelect(t, v); c2.Handler != "kubeconfig" || c2 == c {
		t.Fatalf("Select() = %v after the 401, want the fallback's new credential", c2)
	}
	eventually(t, "the re-login's end", func() bool { return idle(v) })
	for _, tc := range []struct{ msg, with string }{
		{"credential invalidated", `"handler"="kubeconfig"`},
		{"logging in", `"reason"="rejected by the server (401)"`},
		{"logged in", `"reason"="rejected by the server (401)"`},
	} {
		n := 0
		for _, line := range logLines(&logs, tc.msg) {
			if strings.Contains(line, tc.with) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d INFO lines %q with %s, want 1:\n%s", n, tc.msg, tc.with, logs.String())
		}
	}
}
