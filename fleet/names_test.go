package fleet

import (
	"testing"
)

// A cluster's handler is named after the object it reads: the kubeconfig
// Secret, the Argo CD cluster Secret, the ClusterProfile.
func TestClusterHandlersNameTheirSource(t *testing.T) {
	api := newAPIServer(t)
	capi := newHub(t, SecretsOptions{})
	capi.put("capi", "prod-kubeconfig", capiLabels("prod"), map[string][]byte{"value": api.kubeconfig()})
	argo := newHub(t, SecretsOptions{Format: ArgoCD})
	argo.put("argocd", "cluster-prod", argoLabels(), argoSecret("prod", api.srv.URL,
		map[string]any{"bearerToken": *api.token.Load(), "tlsClientConfig": map[string]any{"caData": api.caPEM()}}))
	s := newSpoke(t)
	p := newTestProvider(t, "test")
	profiles := newProfileHub(t, ProfilesOptions{Providers: []AccessProvider{p.AccessProvider}})
	profiles.put(t, profile("inv", "east", "test", s.cluster()))

	ctx := ctxFor(t)
	for _, tc := range []struct {
		fleet         *Fleet
		cluster, want string
	}{
		{capi.fleet, "capi/prod", "kubeconfig Secret capi/prod-kubeconfig"},
		{argo.fleet, "argocd/prod", "Argo CD cluster Secret argocd/cluster-prod"},
		{profiles.fleet, "inv/east", "ClusterProfile inv/east"},
	} {
		eventually(t, tc.cluster, func() bool { return tc.fleet.Vault(tc.cluster) != nil })
		c, err := tc.fleet.Vault(tc.cluster).Select(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.cluster, err)
		}
		if c.Handler != tc.want {
			t.Errorf("%s: handler %q, want %q", tc.cluster, c.Handler, tc.want)
		}
	}
}
