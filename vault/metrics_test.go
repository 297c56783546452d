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
	"github.com/authvault/authvault/testkit/testlog"
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
authvault_credentials{cluster="",state="invalidated"} 1
authvault_credentials{cluster="",state="valid"} 1
# HELP authvault_waiting_callers Callers waiting for a login now.
# TYPE authvault_waiting_callers gauge
authvault_waiting_callers{cluster=""} 0
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

// Every vault's series carry the label cluster, empty unless the
// registerer adds it: a plain vault (the quickstart's) and the vaults of a
// fleet, whose registerer labels each cluster, share one registry (issue 32,
// item 9: the fleet's were refused for their different label names).
func TestMetricsOfAPlainAndALabelledVaultShareARegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	var logs testlog.Buffer
	plain := New(Options{Logger: logs.Logger(0), Registerer: reg, NoFallback: true})
	defer plain.Close()
	labelled := New(Options{Logger: logs.Logger(0), NoFallback: true,
		Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"cluster": "prod"}, reg)})
	defer labelled.Close()
	if strings.Contains(logs.String(), "metrics") {
		t.Errorf("a vault's metrics were not registered:\n%s", logs.String())
	}
	const want = `
# HELP authvault_waiting_callers Callers waiting for a login now.
# TYPE authvault_waiting_callers gauge
authvault_waiting_callers{cluster=""} 0
authvault_waiting_callers{cluster="prod"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "authvault_waiting_callers"); err != nil {
		t.Error(err)
	}
	labelled.Close()
	const left = `
# HELP authvault_waiting_callers Callers waiting for a login now.
# TYPE authvault_waiting_callers gauge
authvault_waiting_callers{cluster=""} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(left), "authvault_waiting_callers"); err != nil {
		t.Errorf("after the labelled vault closed: %v", err)
	}
}

// A second plain vault on a registry cannot register beside the first
// (their series would be the same): it says so, and how to tell them
// apart; with that done, it registers.
func TestMetricsOfASecondPlainVaultSayWhatToDo(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs testlog.Buffer
	first := New(Options{Registerer: reg, NoFallback: true})
	defer first.Close()
	second := New(Options{Logger: logs.Logger(0), Registerer: reg, NoFallback: true})
	defer second.Close()
	if got := logs.String(); !strings.Contains(got, `vault: metrics not registered`) || !strings.Contains(got, `prometheus.WrapRegistererWith(prometheus.Labels{\"cluster\"`) {
		t.Errorf("the second vault's log does not say its metrics are not registered, and the fix:\n%s", got)
	}
	if n, err := testutil.GatherAndCount(reg, "authvault_waiting_callers"); err != nil || n != 1 {
		t.Errorf("waiting_callers series = %d (%v), want the first vault's", n, err)
	}
	var fixed testlog.Buffer
	third := New(Options{Logger: fixed.Logger(0), NoFallback: true,
		Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"cluster": "other"}, reg)})
	defer third.Close()
	if fixed.String() != "" {
		t.Errorf("with the fix, the vault logged:\n%s", fixed.String())
	}
	if n, err := testutil.GatherAndCount(reg, "authvault_waiting_callers"); err != nil || n != 2 {
		t.Errorf("waiting_callers series = %d (%v), want the first's and the third's", n, err)
	}
}
