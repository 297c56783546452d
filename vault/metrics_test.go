package vault

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authvault/authvault/login"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	v, srv, iss := issuingVault(t, Options{Registerer: reg}, "", login.ID("issuer"))
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: srv.URL(), CAData: iss.caPEM, Token: "expiring-secret-token",
			Expiration: time.Now().Add(time.Hour), Priority: -1}, nil
	}, login.ID("expiring"))
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { return nil, errors.New("down") },
		login.ID("broken"), login.Retries(0))

	srv.allow("expiring-secret-token")
	mustSelect(t, v)
	eventually(t, "the logins", func() bool { return v.snap.Load().size() == 2 && idle(v) })
	// The issuer's token is revoked: the request is retried with the
	// lower-priority credential, which is left.
	srv.revoke(iss.latest())
	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
		t.Fatal("GET failed")
	}

	checks := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"retries", v.metrics.retries, 1},
		{"invalidations", v.metrics.invalidations.WithLabelValues("issuer"), 1},
		{"issuer logins", v.metrics.logins.WithLabelValues("issuer", "success"), 1},
		{"broken logins", v.metrics.logins.WithLabelValues("broken", "error"), 1},
	}
	for _, c := range checks {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	const gauges = `
# HELP authvault_credentials Credentials by state: valid ones held, invalidated ones kept to be refused if their handler returns them again.
# TYPE authvault_credentials gauge
authvault_credentials{state="invalidated"} 1
authvault_credentials{state="valid"} 1
# HELP authvault_waiting_callers Callers waiting for a login now.
# TYPE authvault_waiting_callers gauge
authvault_waiting_callers 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(gauges), "authvault_credentials", "authvault_waiting_callers"); err != nil {
		t.Error(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sawExpiry := false
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "tok-") || strings.Contains(l.GetValue(), "secret") {
					t.Errorf("%s has label %s=%q: credential data", f.GetName(), l.GetName(), l.GetValue())
				}
			}
			if f.GetName() == "authvault_credential_expiry_seconds" {
				sawExpiry = true
				if got := m.GetGauge().GetValue(); got < 3500 || got > 3600 {
					t.Errorf("expiry = %v s, want about an hour less the leeway", got)
				}
			}
		}
	}
	if !sawExpiry {
		t.Error("no authvault_credential_expiry_seconds for the expiring handler")
	}
	if n := testutil.CollectAndCount(v.metrics.loginDuration); n != 3 {
		t.Errorf("login duration series = %d, want one per handler", n)
	}
}

func TestMetricsRegisterNothingWithoutARegisterer(t *testing.T) {
	v := New(Options{})
	defer v.Close()
	// A second vault on a registry works too when wrapped.
	reg := prometheus.NewRegistry()
	a := New(Options{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"vault": "a"}, reg)})
	defer a.Close()
	b := New(Options{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"vault": "b"}, reg)})
	defer b.Close()
	if n, err := testutil.GatherAndCount(reg, "authvault_waiting_callers"); err != nil || n != 2 {
		t.Errorf("waiting_callers series = %d (%v), want one per vault", n, err)
	}
}
