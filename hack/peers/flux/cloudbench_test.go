package flux_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/auth"
	"github.com/fluxcd/pkg/auth/utils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

// One new usable config per rotation, for a cloud member (the hub, as in
// TestCloudConfigMapSideBySide): per rotation, the TokenRequests on the hub
// and the requests each cloud's stand-in answered, by endpoint.
//
//   - authvault: the vault's refresh (one login: a TokenRequest, the
//     exchange), then a request with the config it keeps;
//   - flux: utils.GetRESTConfig, then a request with its config, whose
//     round tripper runs auth.GetRESTConfig again (no token cache).
//
// Run with:
//
//	KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) go -C hack/peers/flux test -run '^$' -bench BenchmarkCloudRotation
func BenchmarkCloudRotation(b *testing.B) {
	e := setup(b)
	putCloudAccounts(b, e)
	for _, c := range []struct{ cloud, sa, cluster string }{
		{"aws", "irsa", "arn:aws:eks:" + awsRegion + ":123456789012:cluster/" + awsCluster},
		{"gcp", "wif", ""},
		{"azure", "azwi", ""},
	} {
		cm := configMap{ns: cloudNS, name: "bench-" + c.cloud, data: map[string]string{
			"provider": c.cloud, "address": e.hub.Server, "ca.crt": string(e.hub.CAData), "serviceAccountName": c.sa}}
		if c.cluster != "" {
			cm.data["cluster"] = c.cluster
		}
		put(b, e, cm)
		b.Run(c.cloud+"/authvault", func(b *testing.B) { benchCloudOurs(b, e, cm) })
		b.Run(c.cloud+"/flux", func(b *testing.B) { benchCloudFlux(b, e, cm) })
	}
}

func benchCloudOurs(b *testing.B, e *env, cm configMap) {
	ctx := testwait.Context(b)
	m := &mints{}
	f := fleet.New(fleet.Options{})
	defer f.Close()
	watchCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.WatchFlux(watchCtx, fleet.FluxOptions{Config: m.config(e.hub.Admin), Namespace: cm.ns, LabelSelector: caseLabel + "=" + cm.name,
			Operator: operatorNS + "/" + operatorSA, Providers: ourClouds(), Login: []login.Option{login.Backoff(10*time.Millisecond, time.Second)}})
	}()
	defer func() { stop(); <-done }()
	name := cm.ns + "/" + cm.name
	testwait.For(b, "the fleet to take "+name, func() bool { return slices.Contains(f.Names(), name) })
	cfg, err := f.RESTConfig(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS = -1
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		b.Fatal(err)
	}
	v := f.Vault(name)
	minted, calls := m.total(), cloudStandIn.counts()
	b.ResetTimer()
	for range b.N {
		old, err := v.Select(ctx)
		if err != nil {
			b.Fatal(err)
		}
		v.Refresh()
		for {
			cur, err := v.Select(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if cur.Fingerprint() != old.Fingerprint() {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCloud(b, m.total()-minted, calls)
}

func benchCloudFlux(b *testing.B, e *env, cm configMap) {
	ctx := testwait.Context(b)
	m := &mints{}
	hub, err := client.New(m.config(e.hub.Admin), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ref := meta.KubeConfigReference{ConfigMapRef: &meta.LocalObjectReference{Name: cm.name}}
	calls := cloudStandIn.counts()
	b.ResetTimer()
	for range b.N {
		cfg, err := utils.GetRESTConfig(ctx, ref, cm.ns, hub, auth.WithProxyURL(cloudNetwork.ProxyURL()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCloud(b, m.total(), calls)
}

// reportCloud reports per rotation the TokenRequests and the stand-ins'
// requests since before, by endpoint, and logs them.
func reportCloud(b *testing.B, minted int, before map[string]int) {
	n := float64(b.N)
	b.ReportMetric(float64(minted)/n, "tokenrequests/rotation")
	var sts float64
	var lines []string
	for k, v := range cloudStandIn.counts() {
		d := float64(v - before[k])
		if d == 0 {
			continue
		}
		sts += d
		unit := strings.ReplaceAll(strings.ReplaceAll(k, " ", "-"), "/", "-") + "/rotation"
		b.ReportMetric(d/n, unit)
		lines = append(lines, k)
	}
	b.ReportMetric(sts/n, "cloud-requests/rotation")
	slices.Sort(lines)
	b.Logf("%d rotations: %.1f TokenRequests and %.1f cloud requests (%s) each", b.N, float64(minted)/n, sts/n, strings.Join(lines, ", "))
}
