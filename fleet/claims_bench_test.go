package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/authvault/authvault/handlers"
)

// BenchmarkSecretEvents: what the watch's event handler costs a hub of
// 1,000 and 10,000 kubeconfig Secrets: the initial list (a custom metric,
// list-ms: every Secret added, its cluster's vault created) and then each
// rewrite of a Secret (an op: the first n change the kubeconfig, which
// tells the cluster's unused vault to refresh; the rest leave it as it was), as Cluster API's EKS provider rewrites its token
// kubeconfigs every few minutes. A claim is decided among the claims on its
// own cluster only: scanning all of them made the list quadratic (1.8 s at
// 10,000) and each rewrite half a millisecond.
//
//	go test -run '^$' -bench BenchmarkSecretEvents ./fleet
func BenchmarkSecretEvents(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			selector, err := labels.Parse(ClusterNameLabel)
			if err != nil {
				b.Fatal(err)
			}
			f := New(Options{})
			defer f.Close()
			w := newSecretWatch(context.Background(), f, SecretsOptions{Client: fake.NewClientset()}, clusterAPIFormat("value", handlers.DenyAll, nil), selector)
			w.synced = true // as after the initial list
			secret := func(i, version int) *corev1.Secret {
				c := fmt.Sprintf("wl%d", i)
				s, _ := w.slim(&corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: c + "-kubeconfig", Labels: capiLabels(c)},
					Data:       map[string][]byte{"value": fmt.Appendf(nil, "%s-%d", c, version)},
				})
				return s.(*corev1.Secret)
			}
			start := time.Now()
			for i := range n {
				w.upsert(secret(i, 0))
			}
			list := time.Since(start)
			rewrites := make([]*corev1.Secret, n)
			for i := range n {
				rewrites[i] = secret(i, 1)
			}
			i := 0
			for b.Loop() {
				w.upsert(rewrites[i%n])
				i++
			}
			b.ReportMetric(float64(list.Milliseconds()), "list-ms") // after b.Loop, which resets the metrics
		})
	}
}
