package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/testkit/testcluster"
)

// BenchmarkAddonAuth measures the middleware in front of a trivial
// upstream on loopback, against the upstream called directly and against
// controller-runtime's filters.WithAuthenticationAndAuthorization (the
// filter kubebuilder ships; it also makes a SubjectAccessReview, allowed
// here by RBAC), all on one real API server. It reports the latency
// percentiles of the requests and the reviews sent per request.
//
//	KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) go test -run '^$' -bench AddonAuth -benchmem ./integration
func BenchmarkAddonAuth(b *testing.B) {
	c, err := testcluster.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Stop() })
	cs, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// controller-runtime's filter reviews tokens without an audience, so
	// the API server's own: its callers get tokens for the API server,
	// which it would accept anywhere.
	tokens, apiTokens := benchTokens(b, ctx, cs, 100)

	upstream := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	counter := &reviewCounter{}
	cfg := rest.CopyConfig(c.Admin)
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })

	a, err := addonauth.New(addonauth.Options{Audience: addonAudience, Config: cfg, SuccessTTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, httpClient)
	if err != nil {
		b.Fatal(err)
	}
	crHandler, err := filter(logr.Discard(), upstream)
	if err != nil {
		b.Fatal(err)
	}
	sides := []struct {
		name    string
		handler http.Handler
		tokens  []string
	}{
		{"direct", upstream, tokens},
		{"addonauth", a.Middleware(upstream), tokens},
		{"controller-runtime", crHandler, apiTokens},
	}
	// In process: the time each handler adds to a request, without the
	// network and the HTTP client, warm cache, one token.
	for _, side := range sides {
		b.Run(side.name+"/in-process", func(b *testing.B) {
			tok := side.tokens[0]
			serve := func() int {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				rec := httptest.NewRecorder()
				side.handler.ServeHTTP(rec, req)
				return rec.Code
			}
			if code := serve(); code != 200 {
				b.Fatalf("warm-up request = %d", code)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if serve() != 200 {
						b.Error("refused")
					}
				}
			})
		})
	}
	for _, side := range sides {
		srv := httptest.NewServer(side.handler)
		tokens := side.tokens
		for _, load := range []struct {
			name   string
			tokens func(i int) string
		}{
			{"one token", func(int) string { return tokens[0] }},
			{"100 tokens", func(i int) string { return tokens[i%len(tokens)] }},
			{"garbage", func(i int) string { return fmt.Sprintf("garbage-%d-%d", time.Now().UnixNano(), i) }},
		} {
			if side.name == "direct" && load.name != "one token" {
				continue
			}
			b.Run(side.name+"/"+load.name, func(b *testing.B) {
				benchRequests(b, srv.URL, load.tokens, counter, load.name != "garbage")
			})
		}
		srv.Close()
	}
}

// benchRequests sends b.N requests from parallel clients, each with the
// token tokens(i), after one warm-up request per token; it reports the
// reviews per 10,000 requests and the latency percentiles.
func benchRequests(b *testing.B, url string, tokens func(int) string, counter *reviewCounter, warm bool) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	send := func(tok string) int {
		req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if warm {
		for i := range 100 {
			if code := send(tokens(i)); code != 200 {
				b.Fatalf("warm-up request = %d", code)
			}
		}
	}
	var next atomic.Int64
	var mu sync.Mutex
	var all []time.Duration
	before := counter.count.Load()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			i := int(next.Add(1))
			start := time.Now()
			code := send(tokens(i))
			mine = append(mine, time.Since(start))
			if warm && code != 200 {
				b.Errorf("request = %d", code)
			}
		}
		mu.Lock()
		all = append(all, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	slices.Sort(all)
	b.ReportMetric(float64(counter.count.Load()-before)*10_000/float64(b.N), "reviews/10k")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

// benchTokens makes n ServiceAccounts allowed to GET /metrics (for
// controller-runtime's authorization) and two tokens of each: one for the
// service's audience, one for the API server's.
func benchTokens(b *testing.B, ctx context.Context, cs kubernetes.Interface, n int) (forService, forAPI []string) {
	ns := "addon-bench"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "system:serviceaccounts:" + ns}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("caller-%d", i)
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for _, aud := range [][]string{{addonAudience}, nil} {
			tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
				Spec: authnv1.TokenRequestSpec{Audiences: aud, ExpirationSeconds: ptr.To[int64](3600)},
			}, metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if aud != nil {
				forService = append(forService, tr.Status.Token)
			} else {
				forAPI = append(forAPI, tr.Status.Token)
			}
		}
	}
	return forService, forAPI
}
