package vault

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
)

// handlerLabels are the handler label values of the vault's login metric.
func handlerLabels(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var labels []string
	for _, f := range families {
		if f.GetName() != "authvault_logins_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels = append(labels, labelValue(m, "handler"))
		}
	}
	return labels
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A handler that names itself goes by its name in credentials and logs,
// and by its short label in metrics; two of one label are told apart;
// login.ID overrides both.
func TestNamedHandlers(t *testing.T) {
	var logs testlog.Buffer
	reg := prometheus.NewRegistry()
	v, clk := testVault(t, Options{Logger: logs.Logger(0), Registerer: reg})
	give := func(token string, priority int) login.Handler {
		return func(context.Context) (*login.ConnectionInfo, error) {
			return &login.ConnectionInfo{Server: "https://api.example:6443", Token: token, Priority: priority}, nil
		}
	}
	v.OnLogin(login.Named("token file /var/run/secrets/tokens/a-rather-long-path/api-token", "token file", give("a", 3)))
	v.OnLogin(login.Named("token file /mnt/b", "token file", give("b", 2)))
	v.OnLogin(login.Named("token file /mnt/c", "token file", give("c", 1)), login.ID("mine"))
	if c := mustSelect(t, v); c.Handler != "token file /var/run/secrets/tokens/a-rather-long-path/api-token" {
		t.Errorf("Credential.Handler = %q, want the handler's name", c.Handler)
	}
	settled(t, v, clk)
	got := strings.Join(handlerLabels(t, reg), ",")
	if want := "mine,token file,token file#2"; got != want {
		t.Errorf("metric handler labels = %s, want %s", got, want)
	}
	for _, want := range []string{`"handler"="token file /var/run/secrets/tokens/a-rather-long-path/api-token"`, `"handler"="token file /mnt/b"`, `"handler"="mine"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not name %s:\n%s", want, logs.String())
		}
	}
}
