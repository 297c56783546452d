package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
)

const (
	secretToken    = "tok-DO-NOT-LOG-1234567890"
	secretPassword = "pw-DO-NOT-LOG-0987654321"
)

// The vault's log lines, errors and printed credentials name handlers and
// fingerprints, never a secret.
func TestNothingRevealsSecrets(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(1)})
	calls := 0
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		calls++
		if calls > 1 {
			return nil, errors.New("store down")
		}
		return &login.ConnectionInfo{Server: "https://a", Token: secretToken}, nil
	}, login.ID("tok"), login.Retries(0))
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: "https://b", Username: "u", Password: secretPassword, Priority: -1}, nil
	}, login.ID("basic"), login.Retries(0))

	mustSelect(t, v)
	eventually(t, "both credentials", func() bool { return v.snap.Load().size() == 2 })
	c := mustSelect(t, v)
	// Invalidate through a context logger: the line goes there.
	var ctxLogs testlog.Buffer
	ctx := logr.NewContext(context.Background(), ctxLogs.Logger(1))
	if err := v.Invalidate(ctx, c, errors.New("401 Unauthorized")); err != nil {
		t.Fatal(err)
	}
	other := mustSelect(t, v)
	_ = v.Invalidate(context.Background(), other, errors.New("401 Unauthorized"))
	clk.Step(handlerconf.DefaultBackoffInitial) // past the login floor
	le := selectErr(t, v)
	asJSON, _ := json.Marshal(c.MarshalLog())

	outputs := map[string]string{
		"logs":         logs.String(),
		"context logs": ctxLogs.String(),
		"LoginError":   le.Error(),
		"%v":           fmt.Sprintf("%v", c),
		"%+v":          fmt.Sprintf("%+v", c),
		"%#v":          fmt.Sprintf("%#v", c),
		"%+v of other": fmt.Sprintf("%+v", other),
		"%q":           fmt.Sprintf("%q", c),
		"%+v slice":    fmt.Sprintf("%+v", []*Credential{c, other}),
		"MarshalLog":   string(asJSON),
	}
	for name, out := range outputs {
		for _, secret := range []string{secretToken, secretPassword} {
			if strings.Contains(out, secret) {
				t.Errorf("%s reveals a secret: %s", name, out)
			}
		}
	}
	for _, want := range []string{`"logged in"`, `"handler"="tok"`, c.Fingerprint(), `"login failed"`, "store down"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
	if !strings.Contains(ctxLogs.String(), `"credential invalidated"`) || !strings.Contains(ctxLogs.String(), c.Fingerprint()) {
		t.Errorf("context logger lacks the invalidation:\n%s", ctxLogs.String())
	}
	if !strings.Contains(fmt.Sprintf("%v", c), `Handler: "tok"`) {
		t.Errorf("%%v of a credential = %v, want its handler", c)
	}
	if !strings.Contains(string(asJSON), `"handler":"tok"`) {
		t.Errorf("MarshalLog of a credential = %s, want its handler under \"handler\", as Credential.Handler", asJSON)
	}
}

func TestLoginErrorText(t *testing.T) {
	boom := errors.New("boom")
	e := &LoginError{
		Handlers: []Outcome{
			{Handler: "a", Err: boom},
			{Handler: "b", Running: true},
			{Handler: "c"},
		},
		Server: "https://api",
		Cause:  errors.New("401"),
		Err:    context.Canceled,
	}
	want := `vault: no usable credential for https://api: the last one was invalidated: 401; context canceled; ` +
		`handler "a": boom; handler "b" is still logging in; handler "c" has not run`
	if e.Error() != want {
		t.Errorf("Error() = %q\nwant      %q", e.Error(), want)
	}
	if !errors.Is(e, boom) || !errors.Is(e, context.Canceled) {
		t.Error("errors.Is does not see through LoginError")
	}
}

// A handler's error that quotes a URL with a password (net/http's and
// url.Parse's do) reaches neither the log nor a LoginError in any form.
func TestHandlerErrorsWithURLPasswordsAreRedacted(t *testing.T) {
	const password = "hunter2-DO-NOT-LOG"
	var logs testlog.Buffer
	v, _ := testVault(t, Options{Logger: logs.Logger(1)})
	badPort := "bad"
	_, parseErr := url.Parse(fmt.Sprintf("https://svc:%s@vault.example:%s/v1/token", password, badPort))
	errs := []error{
		&url.Error{Op: "Get", URL: "https://svc:" + password + "@vault.example/v1/token", Err: errors.New("connection refused")},
		fmt.Errorf("reading the secret store: %w", parseErr),
	}
	for i, err := range errs {
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { return nil, err },
			login.ID(fmt.Sprintf("store-%d", i)), login.Retries(0))
	}
	le := selectErr(t, v)
	if !errors.As(le, new(*url.Error)) {
		t.Errorf("LoginError %v does not unwrap to the handler's *url.Error", le)
	}
	asJSON, _ := json.Marshal(le)
	for name, out := range map[string]string{
		"logs": logs.String(), "Error": le.Error(), "%v": fmt.Sprintf("%v", le), "%+v": fmt.Sprintf("%+v", le),
		"%#v": fmt.Sprintf("%#v", le), "%q": fmt.Sprintf("%q", le), "%s": fmt.Sprintf("%s", le),
		"wrapped": fmt.Errorf("reconcile: %w", le).Error(), "JSON": string(asJSON),
		"outcome": le.Handlers[0].String(),
	} {
		if strings.Contains(out, password) {
			t.Errorf("%s reveals the password: %s", name, out)
		}
	}
	if !strings.Contains(le.Error(), "vault.example") {
		t.Errorf("LoginError %v lost the host: only user info is redacted", le)
	}
}
