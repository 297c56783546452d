package aks_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/fleet"
)

// A tenant that is not one is named by where it came from: the
// ServiceAccount's annotation, or aks.FluxOptions.TenantID, which is the
// operator's to mend, not the ServiceAccount's writer's.
func TestFluxNamesWhereATenantCameFrom(t *testing.T) {
	for _, c := range []struct {
		name        string
		opts        aks.FluxOptions
		annotations map[string]string
		want, not   string
	}{
		{"annotation", aks.FluxOptions{}, map[string]string{"azure.workload.identity/client-id": client, "azure.workload.identity/tenant-id": "../common"}, "annotation azure.workload.identity/tenant-id", "FluxOptions"},
		{"default", aks.FluxOptions{TenantID: "../common"}, map[string]string{"azure.workload.identity/client-id": client}, "aks.FluxOptions.TenantID", `annotation azure.workload.identity/tenant-id "`},
	} {
		t.Run(c.name, func(t *testing.T) {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "deployer", Annotations: c.annotations}}
			_, err := aks.Flux(c.opts).New(context.Background(), fleet.FluxCluster{ConfigMap: "team-a/prod", ServiceAccount: sa})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
				t.Errorf("got %v, want an error that names %s and not %s", err, c.want, c.not)
			}
		})
	}
}
