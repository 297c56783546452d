package flux_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/auth"
	"github.com/fluxcd/pkg/auth/utils"
	tokencache "github.com/fluxcd/pkg/cache"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

// One token rotation followed by one reconcile, on the shared hub and
// member, through a generic ConfigMap (team-a/deployer, the address as
// audience): per rotation, the TokenRequests and other requests arriving
// at the hub, the relists of namespaces (a LIST, or a watch-list) and the
// requests arriving at the member (a watch counted once it ends), the
// connections opened to it, the process's allocations,
// and the time from the rotation's start to a request answered with the
// new token. A reconcile reads the member's namespaces through a
// controller-runtime cache:
//
//   - authvault: one config for the member, one cache on it, started once;
//     the rotation is the vault's refresh (as when the token nears its
//     expiry), and the reconcile reads the cache.
//   - flux: a config per reconcile (utils.GetRESTConfig), so a cache per
//     reconcile, started and synced on it; its round tripper asks for a
//     token at every request.
//   - flux-token-cache: the same with Flux's token cache, new at each
//     rotation (what its expiry at 80% of the token's life does), so the
//     reconcile's requests share one token.
//
// Run with make bench-flux, or:
//
//	KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) go -C hack/peers/flux test -run '^$' -bench BenchmarkRotation -benchmem
func BenchmarkRotation(b *testing.B) {
	e := setup(b)
	cm := configMap{ns: tenantNS, name: "bench", data: map[string]string{
		"provider": "generic", "address": e.addr, "ca.crt": e.ca, "serviceAccountName": deployer}}
	put(b, e, cm)
	b.Run("authvault", func(b *testing.B) { benchOurs(b, e, cm) })
	b.Run("flux", func(b *testing.B) { benchFlux(b, e, cm, false) })
	b.Run("flux-token-cache", func(b *testing.B) { benchFlux(b, e, cm, true) })
}

func benchOurs(b *testing.B, e *env, cm configMap) {
	ctx := testwait.Context(b)
	f := fleet.New(fleet.Options{})
	defer f.Close()
	watchCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.WatchFlux(watchCtx, fleet.FluxOptions{Config: e.hub.Admin, Namespace: cm.ns, LabelSelector: caseLabel + "=" + cm.name,
			Operator: operatorNS + "/" + operatorSA, Login: []login.Option{login.Backoff(10*time.Millisecond, time.Second)}})
	}()
	defer func() { stop(); <-done }()
	name := cm.ns + "/" + cm.name
	testwait.For(b, "the fleet to take "+name, func() bool { return slices.Contains(f.Names(), name) })
	cfg, err := f.RESTConfig(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	cache, stopCache := startCache(b, cfg)
	defer stopCache()
	reconcile(b, cache)
	// The rotations come faster than client-go's default limit (5 a
	// second) lets one client send; Flux's path makes a client per
	// reconcile, which starts with a full bucket.
	unlimited := rest.CopyConfig(cfg)
	unlimited.QPS = -1
	cs := kubernetes.NewForConfigOrDie(unlimited)
	v := f.Vault(name)

	before := counts(b, e)
	var usable time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
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
		usable += time.Since(start)
		reconcile(b, cache)
	}
	b.StopTimer()
	report(b, before, counts(b, e), usable)
}

func benchFlux(b *testing.B, e *env, cm configMap, withTokenCache bool) {
	ctx := testwait.Context(b)
	hub, err := client.New(e.hub.Admin, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ref := meta.KubeConfigReference{ConfigMapRef: &meta.LocalObjectReference{Name: cm.name}}

	before := counts(b, e)
	var usable time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		var opts []auth.Option
		if withTokenCache {
			tc, err := tokencache.NewTokenCache(8)
			if err != nil {
				b.Fatal(err)
			}
			opts = append(opts, auth.WithCache(*tc, tokencache.InvolvedObject{Kind: "Kustomization", Name: "bench", Namespace: cm.ns, Operation: "reconcile"}))
		}
		cfg, err := utils.GetRESTConfig(ctx, ref, cm.ns, hub, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
		usable += time.Since(start)
		cache, stopCache := startCache(b, cfg)
		reconcile(b, cache)
		stopCache()
	}
	b.StopTimer()
	report(b, before, counts(b, e), usable)
}

// startCache starts a controller-runtime cache on cfg; stop stops it and
// waits for it.
func startCache(b *testing.B, cfg *rest.Config) (_ crcache.Cache, stop func()) {
	c, err := crcache.New(cfg, crcache.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	if !c.WaitForCacheSync(testwait.Context(b)) {
		b.Fatal("the cache did not start")
	}
	return c, func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

// reconcile reads the member's namespaces through the cache (the first
// read starts the informer and waits for its list).
func reconcile(b *testing.B, c crcache.Cache) {
	var list corev1.NamespaceList
	if err := c.List(testwait.Context(b), &list); err != nil {
		b.Fatal(err)
	}
	if len(list.Items) == 0 {
		b.Fatal("the cache holds no namespace of the member")
	}
}

// tally is what has arrived at the hub and the member so far.
type tally struct {
	tokenRequests, hubRequests, relists, memberRequests float64
	connections                                         int64
}

// A relist of namespaces is a LIST, or with client-go's WatchListClient
// (on by default since 1.35) a watch that starts with the initial events:
// apiserver_watch_list_duration_seconds counts those once they are sent.
// A request counts once it is answered; a watch, once it ends.
var (
	tokenRequest = func(l map[string]string) bool {
		return l["resource"] == "serviceaccounts" && l["subresource"] == "token" && l["verb"] == "POST"
	}
	resourceRequest = func(l map[string]string) bool { return l["resource"] != "" }
	namespaceList   = func(l map[string]string) bool {
		return l["resource"] == "namespaces" && (l["verb"] == "LIST" || l["verb"] == "")
	}
)

func counts(b *testing.B, e *env) tally {
	ctx := testwait.Context(b)
	var t tally
	var err error
	read := func(cs kubernetes.Interface, into *float64, metric string, match func(map[string]string) bool) {
		if err == nil {
			*into, err = sum(ctx, cs, metric, match)
		}
	}
	read(e.hubAdmin, &t.tokenRequests, requestTotal, tokenRequest)
	read(e.hubAdmin, &t.hubRequests, requestTotal, resourceRequest)
	var lists, watchLists float64
	read(e.memberAdmin, &lists, requestTotal, namespaceList)
	read(e.memberAdmin, &watchLists, watchListTotal, namespaceList)
	read(e.memberAdmin, &t.memberRequests, requestTotal, resourceRequest)
	if err != nil {
		b.Fatal(err)
	}
	t.relists = lists + watchLists
	t.connections = e.door.accepted.Load()
	return t
}

func report(b *testing.B, before, after tally, usable time.Duration) {
	n := float64(b.N)
	b.ReportMetric((after.tokenRequests-before.tokenRequests)/n, "tokenrequests/rotation")
	b.ReportMetric((after.hubRequests-before.hubRequests)/n, "hub-requests/rotation")
	b.ReportMetric((after.relists-before.relists)/n, "relists/rotation")
	b.ReportMetric((after.memberRequests-before.memberRequests)/n, "member-requests/rotation")
	b.ReportMetric(float64(after.connections-before.connections)/n, "connections/rotation")
	b.ReportMetric(float64(usable.Microseconds())/1000/n, "ms/usable-config")
}
