package fleet

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/vault"
)

// seriesByCluster counts the series of each authvault_* family by the
// value of their cluster label ("" for none).
func seriesByCluster(t *testing.T, g prometheus.Gatherer) map[string]int {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	n := map[string]int{}
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), "authvault_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			cluster := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" {
					cluster = l.GetValue()
				}
			}
			n[cluster]++
		}
	}
	return n
}

// Issue 32, item 9: the README's quickstart vault (Registerer:
// metrics.Registry, no label of its own) and a fleet on the same registry
// (controller-runtime's holds every controller's metrics) both register,
// both show in Gather, and a removed cluster's series go.
func TestHubVaultAndFleetShareARegistry(t *testing.T) {
	ctx := ctxFor(t)
	reg := prometheus.NewRegistry()
	var logs testlog.Buffer
	hubAPI := newAPIServer(t)
	hub := vault.New(vault.Options{Logger: logs.Logger(0).WithName("hub"), Registerer: reg})
	defer hub.Close()
	hub.OnLogin(hubAPI.login)
	if _, err := hub.Select(ctx); err != nil {
		t.Fatal(err)
	}

	f := New(Options{Logger: logs.Logger(0).WithName("fleet"), Registerer: reg})
	defer f.Close()
	a, b := newAPIServer(t), newAPIServer(t)
	for name, api := range map[string]*apiServer{"prod-eu": a, "prod-us": b} {
		if err := f.Add(name, api.login); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Vault(name).Select(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(logs.String(), "registering metrics") {
		t.Errorf("a vault could not register its metrics:\n%s", logs.String())
	}
	got := seriesByCluster(t, reg)
	for _, cluster := range []string{"", "prod-eu", "prod-us"} {
		if got[cluster] == 0 {
			t.Errorf("no authvault_* series for cluster %q; series by cluster: %v", cluster, got)
		}
	}
	if got["prod-eu"] != got["prod-us"] {
		t.Errorf("the two clusters have %d and %d series, want as many", got["prod-eu"], got["prod-us"])
	}

	f.Remove("prod-eu")
	after := seriesByCluster(t, reg)
	if after["prod-eu"] != 0 || after["prod-us"] != got["prod-us"] || after[""] != got[""] {
		t.Errorf("after Remove(prod-eu), series by cluster %v; want prod-eu's gone and the rest as before (%v)", after, got)
	}
}
