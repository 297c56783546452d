package report

import (
	"reflect"
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

func TestAttribution(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	fault := func(kind, scope string, from, to int, grace time.Duration) Fault {
		return Fault{Kind: kind, Scope: scope, Start: at(from), End: at(to), Grace: grace}
	}
	tests := []struct {
		name    string
		fault   Fault
		failure wire.Failure
		want    bool // explained
	}{
		{"outside any window", fault("revocation", "all", 10, 20, 0), wire.Failure{At: at(25), Component: "hub", Kind: "unauthorized"}, false},
		{"before the window", fault("revocation", "all", 10, 20, 0), wire.Failure{At: at(9), Component: "hub", Kind: "unauthorized"}, false},
		{"at its start", fault("revocation", "all", 10, 20, 0), wire.Failure{At: at(10), Component: "hub", Kind: "unauthorized"}, true},
		{"within grace", fault("revocation", "all", 10, 20, 10*time.Second), wire.Failure{At: at(25), Component: "hub", Kind: "unauthorized"}, true},
		{"at the end of grace", fault("revocation", "all", 10, 20, 10*time.Second), wire.Failure{At: at(30), Component: "hub", Kind: "unauthorized"}, true},
		{"past grace", fault("revocation", "all", 10, 20, 10*time.Second), wire.Failure{At: at(30).Add(time.Millisecond), Component: "hub", Kind: "unauthorized"}, false},
		{"hub scope, hub component", fault("plugin-failing", "hub", 10, 20, 0), wire.Failure{At: at(15), Component: "operator", Kind: "unauthorized"}, true},
		{"hub scope, the addon", fault("plugin-failing", "hub", 10, 20, 0), wire.Failure{At: at(15), Component: "addon", Kind: "unauthorized"}, true},
		{"hub scope, a fleet cluster", fault("plugin-failing", "hub", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "c1", Kind: "unauthorized"}, false},
		{"namespace scope, a cluster of it", fault("plugin-hanging", "namespace:profiles", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "profiles/p3", Kind: "timeout"}, true},
		{"namespace scope, a cluster of another", fault("plugin-hanging", "namespace:profiles", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "capi/c3", Kind: "timeout"}, false},
		{"namespace scope, a namespace it begins", fault("plugin-hanging", "namespace:profiles", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "profiles-old/p3", Kind: "timeout"}, false},
		{"namespace scope, the hub", fault("plugin-hanging", "namespace:profiles", 10, 20, 0), wire.Failure{At: at(15), Component: "hub", Kind: "timeout"}, false},
		{"cluster scope, that cluster", fault("revocation", "cluster:c4", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "c4", Kind: "unauthorized"}, true},
		{"cluster scope, another cluster", fault("revocation", "cluster:c4", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "c40", Kind: "unauthorized"}, false},
		{"cluster scope, the hub", fault("revocation", "cluster:c4", 10, 20, 0), wire.Failure{At: at(15), Component: "hub", Kind: "unauthorized"}, false},
		{"no-cluster, its cluster's fault", fault("secret-recreate", "cluster:c4", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "c4", Kind: "no-cluster"}, true},
		{"no-cluster, another cluster's fault", fault("secret-recreate", "cluster:c5", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "c4", Kind: "no-cluster"}, false},
		{"no-cluster, a fault on all", fault("apiserver-restart", "all", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "c4", Kind: "no-cluster"}, false},
		{"no-cluster, a fault on the profiles", fault("plugin-failing", "namespace:profiles", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "profiles/p4", Kind: "no-cluster"}, false},
		{"no-cluster, a profile's own fault", fault("secret-recreate", "cluster:profiles/p4", 10, 20, 0), wire.Failure{At: at(15), Component: "fleet", Cluster: "profiles/p4", Kind: "no-cluster"}, true},
		{"an unknown scope", fault("revocation", "everything", 10, 20, 0), wire.Failure{At: at(15), Component: "hub", Kind: "unauthorized"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fault.explains(tt.failure); got != tt.want {
				t.Errorf("%s %s [%v, %v+%v] explains %s %s %s at %v: got %v, want %v",
					tt.fault.Kind, tt.fault.Scope, tt.fault.Start.Sub(t0), tt.fault.End.Sub(t0), tt.fault.Grace,
					tt.failure.Component, tt.failure.Cluster, tt.failure.Kind, tt.failure.At.Sub(t0), got, tt.want)
			}
		})
	}
}

func TestSummarizeFailures(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := flatRun(2*time.Minute, nil)
	r.Faults = []Fault{
		{Kind: "revocation", Scope: "hub", Start: at(10), End: at(20), Grace: 10 * time.Second},
		{Kind: "apiserver-restart", Scope: "all", Start: at(15), End: at(18)},
		{Kind: "partition", Scope: "namespace:ns", Start: at(40), End: at(50)},
	}
	r.Sides[wire.RoleAuthvault].Failures = []wire.Failure{
		{At: at(90), Component: "fleet", Cluster: "c2", Kind: "refused", Message: "late"},
		{At: at(12), Component: "hub", Kind: "unauthorized", Message: "revoked"},
		{At: at(16), Component: "hub", Kind: "unauthorized", Message: "both"},
		{At: at(16), Component: "fleet", Cluster: "c1", Kind: "refused", Message: "restart"},
		{At: at(45), Component: "fleet", Cluster: "c1", Kind: "refused", Message: "not a profile"},
		{At: at(45), Component: "fleet", Cluster: "ns/p1", Kind: "timeout", Message: "partitioned"},
	}
	ss := Summarize(r).Side(wire.RoleAuthvault)
	want := []Failures{
		{Component: "fleet", Kind: "refused", Explained: 1, By: map[string]int{"apiserver-restart": 1}, Unexplained: 2},
		{Component: "fleet", Kind: "timeout", Explained: 1, By: map[string]int{"partition": 1}},
		{Component: "hub", Kind: "unauthorized", Explained: 2, By: map[string]int{"revocation": 2, "apiserver-restart": 1}},
	}
	if !reflect.DeepEqual(ss.Failures, want) {
		t.Errorf("failures:\ngot  %+v\nwant %+v", ss.Failures, want)
	}
	if ss.Unexplained != 2 {
		t.Errorf("unexplained: got %d, want 2", ss.Unexplained)
	}
	// The first unexplained, by time, whatever order they came in.
	var got []string
	for _, x := range ss.First {
		got = append(got, x.Since.String()+" "+x.Message)
	}
	if want := []string{"45s not a profile", "1m30s late"}; !reflect.DeepEqual(got, want) {
		t.Errorf("first unexplained: got %q, want %q", got, want)
	}
}

func TestSummarizeListsTheFirstFew(t *testing.T) {
	r := flatRun(2*time.Minute, nil)
	for i := 30; i > 0; i-- {
		r.Sides[wire.RoleClientGo].Failures = append(r.Sides[wire.RoleClientGo].Failures,
			wire.Failure{At: t0.Add(time.Duration(i) * time.Second), Component: "watch", Kind: "other"})
	}
	ss := Summarize(r).Side(wire.RoleClientGo)
	if ss.Unexplained != 30 || len(ss.First) != maxListed {
		t.Fatalf("got %d unexplained, %d listed; want 30, %d", ss.Unexplained, len(ss.First), maxListed)
	}
	if ss.First[0].Since != time.Second || ss.First[maxListed-1].Since != maxListed*time.Second {
		t.Errorf("listed from %v to %v, want the earliest: 1s to %v", ss.First[0].Since, ss.First[maxListed-1].Since, maxListed*time.Second)
	}
}
