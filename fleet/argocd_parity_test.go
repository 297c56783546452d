package fleet

import (
	"testing"

	"github.com/authvault/authvault/handlers"
)

// Argo CD builds a rest.Config (RawRestConfig) and client-go uses it as it
// is; the old mapping (rest.Config through FromREST) did the same. A
// kubeconfig of one context goes through clientcmd, which validates and
// strips what a rest.Config keeps: these Secrets must log in as Argo CD
// logs in.
func TestArgoCDSecretAsArgoCDLogsIn(t *testing.T) {
	ctx := ctxFor(t)
	const token = "argo-bearer-0123456789abcdef"
	cert, key := []byte("-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n"), []byte("key-"+token)

	t.Run("a certificate without its key beside a token", func(t *testing.T) {
		// client-go ignores a certificate without a key
		// (TLSClientConfig.HasCertAuth) and sends the token; clientcmd
		// refuses the kubeconfig ("client-key-data or client-key must be
		// specified").
		h := newHub(t, SecretsOptions{Format: ArgoCD})
		h.put("argocd", "c", argoLabels(), argoSecret("a", "https://a.example", map[string]any{
			"bearerToken": token, "tlsClientConfig": map[string]any{"certData": cert},
		}))
		got, err := argoCDSecret(h.client.CoreV1(), "argocd", "c", handlers.DenyAll)(ctx)
		if err != nil || got.Token != token {
			t.Errorf("got %v, %v; want the token, as Argo CD sends it", got, err)
		}
	})

	t.Run("a plugin's config with a certificate sends no stale token", func(t *testing.T) {
		// Argo CD's rest.Config for awsAuthConfig or execProviderConfig
		// has no BearerToken, Username nor Password; with a client
		// certificate and key client-go runs no plugin and sends the
		// certificate alone.
		for name, plugin := range map[string]map[string]any{
			"awsAuthConfig":      {"awsAuthConfig": map[string]any{"clusterName": "prod"}},
			"execProviderConfig": {"execProviderConfig": map[string]any{"command": "sh", "apiVersion": "client.authentication.k8s.io/v1"}},
		} {
			config := map[string]any{"bearerToken": token, "username": "admin", "password": token,
				"tlsClientConfig": map[string]any{"certData": cert, "keyData": key}}
			for k, v := range plugin {
				config[k] = v
			}
			h := newHub(t, SecretsOptions{Format: ArgoCD})
			h.put("argocd", "c", argoLabels(), argoSecret("a", "https://a.example", config))
			got, err := argoCDSecret(h.client.CoreV1(), "argocd", "c", handlers.DenyAll)(ctx)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if got.Token != "" || got.Username != "" || got.Password != "" || len(got.PrivateKeyData) == 0 {
				t.Errorf("%s: got %v; want the certificate alone, as Argo CD sends it", name, got)
			}
		}
	})

	t.Run("a plain-http server that says http://", func(t *testing.T) {
		// Argo CD (and the old rest.Config mapping) send the token to a
		// server that spells out http://; clientcmd drops every
		// credential for a server that is not https, and the login
		// silently becomes anonymous.
		h := newHub(t, SecretsOptions{Format: ArgoCD})
		h.put("argocd", "c", argoLabels(), argoSecret("a", "http://a.example:8080", map[string]any{"bearerToken": token}))
		got, err := argoCDSecret(h.client.CoreV1(), "argocd", "c", handlers.DenyAll)(ctx)
		if err == nil && got.Token != token {
			t.Errorf("got %v; want the token (as Argo CD) or an error, not an anonymous credential", got)
		}
	})
}
