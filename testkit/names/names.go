// Package names tells what a vault calls a login handler: the name its
// errors, logs and credentials give the handler, and the handler label of its
// metrics. The cloud modules' tests check their handlers' names with it, as a
// user sees them, through a real vault.
package names

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/vault"
)

// Seen is what a vault showed of a handler.
type Seen struct {
	// Name is the handler's name: its Credential.Handler, or its Outcome's
	// in the vault's LoginError when its login failed.
	Name string
	// Label is the handler label of the vault's login metric.
	Label string
	// Text is what the vault wrote about the handler: its error, if any,
	// and its log at V(1), for a test to check that no secret shows.
	Text string
}

// InVault registers h alone with a vault of its own, asks it for a
// credential, and returns what the vault showed of h. h must end its first
// attempt at once: with a credential, or with an error that it returns as
// login.Permanent (a missing option), so that the vault gives up on it. It
// fails t if the vault has neither a credential nor a LoginError about h
// within 30 s.
func InVault(t testing.TB, h login.Handler) Seen {
	t.Helper()
	var logs testlog.Buffer
	reg := prometheus.NewRegistry()
	v := vault.New(vault.Options{NoFallback: true, Logger: logs.Logger(1), Registerer: reg})
	defer v.Close()
	v.OnLogin(h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds a hang
	defer cancel()

	var seen Seen
	cred, err := v.Select(ctx)
	var lerr *vault.LoginError
	switch {
	case err == nil:
		seen.Name = cred.Handler
	case errors.As(err, &lerr) && len(lerr.Handlers) == 1 && lerr.Err == nil:
		seen.Name = lerr.Handlers[0].Handler
		seen.Text = err.Error() + "\n"
	default:
		t.Fatalf("names: Select: got %v, want a credential or a LoginError about the one handler", err)
	}
	seen.Text += logs.String()
	seen.Label = loginLabel(t, reg)
	return seen
}

// loginLabel is the handler label of the login metric in reg.
func loginLabel(t testing.TB, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("names: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "authvault_logins_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "handler" {
					return l.GetValue()
				}
			}
		}
	}
	t.Fatalf("names: the vault counted no login")
	return ""
}
