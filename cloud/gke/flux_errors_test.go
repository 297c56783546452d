package gke_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/redact"
)

// A pool provider that is not one is named by where it came from: the
// ServiceAccount's annotation, or gke.FluxOptions.WorkloadIdentityProvider,
// which is the operator's to mend, not the ServiceAccount's writer's.
func TestFluxNamesWhereAPoolProviderCameFrom(t *testing.T) {
	const bad = "//iam.googleapis.com/" + fluxProvider
	for _, c := range []struct {
		name        string
		opts        gke.FluxOptions
		annotations map[string]string
		want, not   string
	}{
		{"annotation", gke.FluxOptions{}, map[string]string{"gcp.auth.fluxcd.io/workload-identity-provider": bad}, "annotation gcp.auth.fluxcd.io/workload-identity-provider", "FluxOptions"},
		{"default", gke.FluxOptions{WorkloadIdentityProvider: bad}, nil, "gke.FluxOptions.WorkloadIdentityProvider", `annotation gcp.auth.fluxcd.io/workload-identity-provider "`},
	} {
		t.Run(c.name, func(t *testing.T) {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "deployer", Annotations: c.annotations}}
			_, err := gke.Flux(c.opts).Audiences(sa)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
				t.Errorf("got %v, want an error that names %s and not %s", err, c.want, c.not)
			}
		})
	}
}

// An email refused is still told apart once the vault's log redaction has
// hidden the part of it before the @: the error says what is wrong of
// the account ID, which is where a mistake most often is.
func TestFluxBadEmailSurvivesRedaction(t *testing.T) {
	for _, email := range []string{"Fleet_Flux@authvault-test.iam.gserviceaccount.com", "flux@authvault-test.iam.gserviceaccount.com"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "deployer", Annotations: map[string]string{
			"gcp.auth.fluxcd.io/workload-identity-provider": fluxProvider,
			"iam.gke.io/gcp-service-account":                email,
		}}}
		_, err := gke.Flux(gke.FluxOptions{}).New(context.Background(), fleet.FluxCluster{ConfigMap: "team-a/prod", ServiceAccount: sa})
		if err == nil {
			t.Fatalf("%s: no error", email)
		}
		id, _, _ := strings.Cut(email, "@")
		if logged := redact.Error(err).Error(); !strings.Contains(logged, id) || !strings.Contains(logged, "iam.gke.io/gcp-service-account") {
			t.Errorf("%s: logged as %q, which names neither the annotation nor the ID %q", email, logged, id)
		}
	}
}
