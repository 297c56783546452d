package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/login"
)

// A Flux ConfigMap's writer (any tenant of its namespace) cannot take the
// name of a cluster that a Cluster API Secret, a ClusterProfile or Add
// serves: a ConfigMap seen first gives the name up when the other comes,
// and does not take it back at its next change.
func TestFluxConfigMapGivesItsNameUp(t *testing.T) {
	for _, source := range []string{"Secret team-a/prod-kubeconfig", "ClusterProfile team-a/prod", addSource} {
		t.Run(source, func(t *testing.T) {
			var added, removed []string
			f := New(Options{
				OnAdd:    func(_ context.Context, m *Member) { added = append(added, m.Name()) },
				OnRemove: func(m *Member) { removed = append(removed, m.Name()) },
			})
			defer f.Close()
			w := newFluxWatch(t, f, FluxOptions{})
			squat := map[string]string{"provider": "generic", "address": "https://tenant.example", "serviceAccountName": "tenant"}
			cm := func() *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod"}, Data: squat}
			}
			w.upsert(cm())
			if _, ok := w.served["team-a/prod"]; !ok {
				t.Fatal("the ConfigMap was not added")
			}
			capi := func(context.Context) (*login.ConnectionInfo, error) { return nil, errors.New("unused") }
			var err error
			if source == addSource {
				err = f.Add("team-a/prod", capi)
			} else {
				var s *seat
				if s, err = f.add("team-a/prod", source, capi, nil); err == nil {
					f.joined(s, "", "")
				}
			}
			if err != nil {
				t.Fatalf("%s could not take its cluster's name from a Flux ConfigMap: %v", source, err)
			}
			squat["address"] = "https://tenant.example:8443"
			w.upsert(cm())
			f.mu.Lock()
			s := f.clusters["team-a/prod"]
			f.mu.Unlock()
			if got := s.sourced(); got != source {
				t.Errorf("the cluster is served by %q, want %q", got, source)
			}
			if strings.Join(added, ",") != "team-a/prod,team-a/prod" || strings.Join(removed, ",") != "team-a/prod" {
				t.Errorf("OnAdd %v, OnRemove %v: want the ConfigMap's cluster added, removed, and the other added", added, removed)
			}
		})
	}
}
