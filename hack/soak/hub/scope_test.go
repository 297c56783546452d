package hub

import (
	"context"
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/report"
	"github.com/authvault/authvault/hack/soak/wire"
)

// A plugin fault breaks the hub's credentials and the ClusterProfile
// clusters (whose provider is the plugin), never a Secret's cluster (a
// kubeconfig token of its own): a Secret's cluster failing during one is
// unexplained. Both are named as the fleet names them, namespace/name.
func TestAttributionOfPluginFaults(t *testing.T) {
	h := &Hub{opts: Options{PluginLatency: time.Second}, endpoints: map[string]*endpoint{}}
	for _, mode := range []Mode{Failing, Hanging, Partition} {
		faults := h.PluginFault(context.Background(), mode, 0)
		during := faults[0].Start
		run := &report.Run{Start: during.Add(-time.Minute), Settled: during, FaultsEnd: during, End: during.Add(time.Minute), Faults: faults,
			Sides: map[string]*report.Side{wire.RoleAuthvault: {Role: wire.RoleAuthvault, Failures: []wire.Failure{
				{At: during, Component: "fleet", Cluster: profilesNamespace + "/p-03", Kind: "unauthorized"},
				{At: during, Component: "fleet", Cluster: FleetName("member-03"), Kind: "unauthorized"},
			}}}}
		ss := report.Summarize(run).Side(wire.RoleAuthvault)
		if ss.Unexplained != 1 || ss.First[0].Cluster != FleetName("member-03") {
			t.Errorf("%s: %d unexplained (%+v), want one: the Secret's cluster %s, not the profile's", faults[0].Kind, ss.Unexplained, ss.First, FleetName("member-03"))
		}
	}
}
