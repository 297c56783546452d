package gke_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/hubtrust"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// The pool providers of the Flux case, as the ServiceAccount's
// gcp.auth.fluxcd.io/workload-identity-provider annotation names them.
const (
	fluxProvider      = "projects/1/locations/global/workloadIdentityPools/fleet/providers/flux-hub"
	fluxOtherProvider = "projects/1/locations/global/workloadIdentityPools/fleet/providers/flux-next"
	// fluxSA is the service account the Flux case impersonates: an ID of
	// 6 to 30 characters, as Google's are.
	fluxSA = "fleet-flux@authvault-test.iam.gserviceaccount.com"
)

// fluxPool is the stand-in's provider name (the annotation's), trusting
// the hub's issuer for the audience Flux mints for: its full resource
// name, which a provider with no allowed audiences takes.
func (e *fed) fluxPool(name string) *pool {
	p := e.pool()
	p.provider = "//iam.googleapis.com/" + name
	p.trust = e.hub.Trust(p.provider)
	p.trust.Subject = ""
	p.impersonators = map[string]string{fluxSA: p.principal(e.hub.Subject())}
	return p
}

// A Flux ConfigMap of provider gcp, as a Flux user writes it, serves a
// fleet member through the stand-in: the pool provider of the
// ServiceAccount's annotation, for its full resource name; then, at the
// next login and with no change of the ConfigMap, the impersonation its
// iam.gke.io/gcp-service-account annotation asks, and another pool
// provider, whose audience the hub's new token carries. An annotation
// that says neither right fails the login with an error that names it.
func fluxMember(t *testing.T, e *fed) {
	e.g.pool.Store(e.fluxPool(fluxProvider))
	e.hub.Annotate(t, map[string]string{"gcp.auth.fluxcd.io/workload-identity-provider": fluxProvider})
	t.Cleanup(func() { e.hub.Annotate(t, nil) })
	logs := &testlog.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	f := e.hub.FluxFleet(t, logs.Logger(1), fleet.FluxOptions{Providers: map[string]fleet.FluxProvider{"gcp": gke.Flux(gke.FluxOptions{TokenURL: e.g.srv.URL + "/sts", IAMCredentialsURL: e.g.srv.URL})}})
	v := hubtrust.Vault(t, f, e.hub.PutFluxConfigMap(t, "gke", map[string]string{"provider": "gcp"}))
	if got, want := clientOf(t, v), e.fluxPool(fluxProvider).principal(e.hub.Subject()); got != want {
		t.Errorf("the member names %q, want the pool's principal %q", got, want)
	}

	e.hub.Annotate(t, map[string]string{"gcp.auth.fluxcd.io/workload-identity-provider": fluxProvider, "iam.gke.io/gcp-service-account": fluxSA})
	v.Refresh()
	testwait.For(t, "the member to name the impersonated service account", func() bool { return clientOf(t, v) == fluxSA })

	e.g.pool.Store(e.fluxPool(fluxOtherProvider))
	e.hub.Annotate(t, map[string]string{"gcp.auth.fluxcd.io/workload-identity-provider": fluxOtherProvider})
	v.Refresh()
	want := e.fluxPool(fluxOtherProvider).principal(e.hub.Subject())
	testwait.For(t, "the member to name the other provider's principal", func() bool { return clientOf(t, v) == want })

	for _, c := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"no provider annotation", map[string]string{}, "has no gcp.auth.fluxcd.io/workload-identity-provider annotation"},
		{"a provider annotation with a full resource name", map[string]string{"gcp.auth.fluxcd.io/workload-identity-provider": "//iam.googleapis.com/" + fluxProvider}, "is not a workload identity pool provider"},
		{"a service account that is no email", map[string]string{"gcp.auth.fluxcd.io/workload-identity-provider": fluxProvider, "iam.gke.io/gcp-service-account": "fleet"}, "is not a Google service account's email"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.hub.Annotate(t, c.annotations)
			name := e.hub.PutFluxConfigMap(t, "gke-"+strings.ReplaceAll(c.name, " ", "-"), map[string]string{"provider": "gcp"})
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
			defer cancel()
			_, err := hubtrust.Vault(t, f, name).Select(ctx)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Flux ConfigMap "+name) {
				t.Errorf("got %v, want an error that names Flux ConfigMap %s and says %q", err, name, c.want)
			}
			e.noSecret(t, printed(err))
		})
	}
	e.noSecret(t, logs.String())
}

// gke.FluxOptions.WorkloadIdentityProvider serves a ServiceAccount with
// no annotation.
func fluxDefaultProvider(t *testing.T, e *fed) {
	e.g.pool.Store(e.fluxPool(fluxProvider))
	f := e.hub.FluxFleet(t, logr.Discard(), fleet.FluxOptions{Providers: map[string]fleet.FluxProvider{"gcp": gke.Flux(gke.FluxOptions{WorkloadIdentityProvider: fluxProvider, TokenURL: e.g.srv.URL + "/sts", IAMCredentialsURL: e.g.srv.URL})}})
	v := hubtrust.Vault(t, f, e.hub.PutFluxConfigMap(t, "gke-default", map[string]string{"provider": "gcp"}))
	if got, want := clientOf(t, v), e.fluxPool(fluxProvider).principal(e.hub.Subject()); got != want {
		t.Errorf("the member names %q, want the default provider's principal %q", got, want)
	}
}
