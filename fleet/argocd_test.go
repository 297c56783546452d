package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

func argoLabels() map[string]string { return map[string]string{ArgoCDSecretTypeLabel: "cluster"} }

// argoSecret is an Argo CD cluster Secret's data for the server with
// config.
func argoSecret(name, server string, config any) map[string][]byte {
	raw, err := json.Marshal(config)
	if err != nil {
		panic(err)
	}
	return map[string][]byte{"name": []byte(name), "server": []byte(server), "config": raw}
}

// Argo CD's cluster Secrets make a fleet too: named by their name key,
// a bearer token and CA data from config, refreshed when config changes.
func TestWatchSecretsArgoCD(t *testing.T) {
	ctx := ctxFor(t)
	h := newHub(t, SecretsOptions{Format: ArgoCD})
	api := newAPIServer(t)
	config := func() map[string]any {
		return map[string]any{"bearerToken": *api.token.Load(), "tlsClientConfig": map[string]any{"caData": api.caPEM()}}
	}
	h.put("argocd", "cluster-prod", argoLabels(), argoSecret("prod", api.srv.URL, config()))
	h.put("argocd", "not-a-cluster", map[string]string{ArgoCDSecretTypeLabel: "repository"}, argoSecret("repo", api.srv.URL, config()))
	eventually(t, "the cluster", func() bool { return h.fleet.Vault("argocd/prod") != nil })
	cfg, err := h.fleet.RESTConfig(ctx, "argocd/prod")
	if err != nil {
		t.Fatal(err)
	}
	if err := version(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	newToken := api.rotate()
	h.put("argocd", "cluster-prod", argoLabels(), argoSecret("prod", api.srv.URL, config()))
	eventually(t, "the new token", func() bool {
		c, err := h.fleet.Vault("argocd/prod").Select(ctx)
		return err == nil && c.Info.Token == newToken
	})
	if got := strings.Join(h.fleet.Names(), ","); got != "argocd/prod" {
		t.Errorf("Names() = %s: a repository Secret is no cluster", got)
	}
}

// What Argo CD's config can say, mapped, and refused where it must be.
func TestArgoCDSecretMapping(t *testing.T) {
	ctx := ctxFor(t)
	marker := filepath.Join(t.TempDir(), "ran")
	const token = "argo-bearer-0123456789abcdef"
	ca := newAPIServer(t).caPEM()
	for _, tc := range []struct {
		name    string
		data    map[string][]byte
		policy  handlers.PluginPolicy
		check   func(t *testing.T, got *login.ConnectionInfo)
		wantErr string
	}{
		{"token, CA, server name, proxy", argoSecret("a", "https://a.example:6443", map[string]any{
			"bearerToken": token, "proxyUrl": "http://proxy.example:3128",
			"tlsClientConfig": map[string]any{"caData": ca, "serverName": "api.a.example"},
		}), handlers.PluginPolicy{}, func(t *testing.T, got *login.ConnectionInfo) {
			if got.Token != token || string(got.CAData) != string(ca) || got.TLSServerName != "api.a.example" || got.ProxyURL != "http://proxy.example:3128" {
				t.Errorf("got %v", got)
			}
		}, ""},
		{"basic auth", argoSecret("a", "https://a.example", map[string]any{"username": "admin", "password": token}), handlers.PluginPolicy{},
			func(t *testing.T, got *login.ConnectionInfo) {
				if got.Username != "admin" || got.Password != token {
					t.Errorf("got %v", got)
				}
			}, ""},
		{"exec plugin under the default policy", argoSecret("a", "https://a.example", map[string]any{
			"execProviderConfig": map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}, "apiVersion": "client.authentication.k8s.io/v1"},
		}), handlers.PluginPolicy{}, nil, `exec plugin "sh" is not allowed: plugin policy DenyAll`},
		{"exec env that steers the plugin, under an Allowlist", argoSecret("a", "https://a.example", map[string]any{
			"execProviderConfig": map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}, "apiVersion": "client.authentication.k8s.io/v1",
				"env": map[string]string{"AWS_REGION": "eu-west-1", "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/kubernetes.io/serviceaccount/token"}},
		}), handlers.Allowlist("sh"), nil, `env "AWS_WEB_IDENTITY_TOKEN_FILE" is not allowed under plugin policy Allowlist`},
		{"awsAuthConfig runs argocd-k8s-auth, refused by default", argoSecret("a", "https://a.example", map[string]any{
			"awsAuthConfig": map[string]any{"clusterName": "prod", "roleARN": "arn:aws:iam::1:role/x"},
		}), handlers.PluginPolicy{}, nil, `exec plugin "argocd-k8s-auth" is not allowed`},
		{"awsAuthConfig allowed but not installed", argoSecret("a", "https://a.example", map[string]any{
			"awsAuthConfig": map[string]any{"clusterName": "prod"},
		}), handlers.AllowAll, nil, "argocd-k8s-auth"},
		// Argo CD's RawRestConfig: awsAuthConfig, else execProviderConfig,
		// else the token and basic auth, which a plugin's config leaves out.
		{"a plugin wins over a token, as in Argo CD", argoSecret("a", "https://a.example", map[string]any{
			"bearerToken": token, "username": "admin", "execProviderConfig": map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}, "apiVersion": "client.authentication.k8s.io/v1"},
		}), handlers.PluginPolicy{}, nil, `exec plugin "sh" is not allowed`},
		{"a plugin without an apiVersion, which client-go could not run", argoSecret("a", "https://a.example", map[string]any{
			"execProviderConfig": map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}},
		}), handlers.AllowAll, nil, `apiVersion must be specified`},
		{"awsAuthConfig wins over execProviderConfig, as in Argo CD", argoSecret("a", "https://a.example", map[string]any{
			"awsAuthConfig": map[string]any{"clusterName": "prod"}, "execProviderConfig": map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}},
		}), handlers.PluginPolicy{}, nil, `exec plugin "argocd-k8s-auth" is not allowed`},
		{"a client certificate wins over a plugin, as in client-go", argoSecret("a", "https://a.example", map[string]any{
			"tlsClientConfig":    map[string]any{"certData": []byte("cert"), "keyData": []byte(token)},
			"execProviderConfig": map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}},
		}), handlers.AllowAll, func(t *testing.T, got *login.ConnectionInfo) {
			if string(got.PrivateKeyData) != token || got.Token != "" {
				t.Errorf("got %v", got)
			}
		}, ""},
		{"no server", map[string][]byte{"name": []byte("a"), "config": []byte(`{"bearerToken":"` + token + `"}`)}, handlers.PluginPolicy{}, nil, "has no server"},
		{"config that is not JSON", map[string][]byte{"server": []byte("https://a.example"), "config": []byte(`{"bearerToken": ` + token)}, handlers.PluginPolicy{}, nil, "not Argo CD's cluster config JSON"},
		{"config of the wrong shape", map[string][]byte{"server": []byte("https://a.example"), "config": []byte(`{"bearerToken": ["` + token + `"]}`)}, handlers.PluginPolicy{}, nil, "not Argo CD's cluster config JSON"},
		{"insecure with a CA", argoSecret("a", "https://a.example", map[string]any{"bearerToken": token, "tlsClientConfig": map[string]any{"insecure": true, "caData": ca}}),
			handlers.PluginPolicy{}, nil, "insecure-skip-tls-verify is set together with a CA"},
		{"server with user info", argoSecret("a", "https://admin:"+token+"@a.example:6443", map[string]any{"bearerToken": "t"}), handlers.PluginPolicy{}, nil, "carries user info"},
		{"server without a scheme, with a password", argoSecret("a", "admin:"+token+"@a.example:6443", map[string]any{"bearerToken": token}), handlers.PluginPolicy{}, nil, "has no scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t, SecretsOptions{Format: ArgoCD})
			h.put("argocd", "c", argoLabels(), tc.data)
			policy := tc.policy
			if policy.PolicyType == "" {
				policy = handlers.DenyAll
			}
			got, err := argoCDSecret(h.client.CoreV1(), "argocd", "c", policy)(ctx)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, got)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "Argo CD cluster Secret argocd/c") {
				t.Fatalf("error = %v, want it to name the Secret and say %q", err, tc.wantErr)
			}
			for _, form := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
				if strings.Contains(form, token) {
					t.Errorf("the error repeats the token: %s", form)
				}
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Error("a plugin ran")
			}
		})
	}
	// A missing Secret is a permanent error naming it.
	h := newHub(t, SecretsOptions{Format: ArgoCD})
	_, err := argoCDSecret(h.client.CoreV1(), "argocd", "gone", handlers.DenyAll)(ctx)
	var perm *login.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "argocd/gone") {
		t.Errorf("missing Secret: %v", err)
	}
}

// The informer's cache keeps of an Argo CD Secret its name and a digest of
// what it authenticates with, never the config.
func TestArgoCDSecretCacheHoldsNoContent(t *testing.T) {
	w := &secretWatch{format: argoCDFormat(handlers.DenyAll)}
	in := &corev1.Secret{Data: argoSecret("prod", "https://a.example", map[string]any{"bearerToken": "argo-s3cret"})}
	out, _ := w.slim(in)
	s := out.(*corev1.Secret)
	if string(s.Data["name"]) != "prod" || len(s.Data[digestKey]) == 0 || strings.Contains(fmt.Sprint(s.Data), "argo-s3cret") || len(s.Data) != 2 {
		t.Errorf("slim gave %q", s.Data)
	}
	rotated, _ := w.slim(&corev1.Secret{Data: argoSecret("prod", "https://a.example", map[string]any{"bearerToken": "argo-other"})})
	if string(rotated.(*corev1.Secret).Data[digestKey]) == string(s.Data[digestKey]) {
		t.Error("a rotated config slims to the same digest")
	}
}

// An Argo CD Secret whose name key changes moves its cluster to the new
// name (OnRemove of the old before OnAdd of the new); one that loses its
// server is no cluster's any more; two of the same name in a namespace
// collide, and the second takes the name when the first goes.
func TestWatchSecretsArgoCDNames(t *testing.T) {
	h := newHub(t, SecretsOptions{Format: ArgoCD})
	api := newAPIServer(t)
	config := map[string]any{"bearerToken": *api.token.Load(), "tlsClientConfig": map[string]any{"caData": api.caPEM()}}
	h.put("argocd", "s1", argoLabels(), argoSecret("prod", api.srv.URL, config))
	eventually(t, "argocd/prod", func() bool { return h.fleet.Vault("argocd/prod") != nil })
	h.put("argocd", "s1", argoLabels(), argoSecret("live", api.srv.URL, config))
	eventually(t, "the move to argocd/live", func() bool {
		return h.fleet.Vault("argocd/live") != nil && h.fleet.Vault("argocd/prod") == nil
	})
	h.put("argocd", "s2", argoLabels(), argoSecret("live", api.srv.URL, config))
	h.put("argocd", "s1", argoLabels(), map[string][]byte{"name": []byte("live"), "config": []byte(`{}`)})
	eventually(t, "s2 to take argocd/live once s1 has no server", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return strings.Join(h.added, ",") == "argocd/prod,argocd/live,argocd/live" &&
			strings.Join(h.removed, ",") == "argocd/prod,argocd/live"
	})
	if got := strings.Join(h.fleet.Names(), ","); got != "argocd/live" {
		t.Errorf("Names() = %s", got)
	}
}

// Argo CD reads its cluster Secrets from its own namespace only: by
// default the watch does too, so a Secret labelled as a cluster in any
// other namespace (anyone's who may write Secrets there) adds nothing.
// Another namespace is one option away.
func TestWatchSecretsArgoCDReadsItsOwnNamespace(t *testing.T) {
	api := newAPIServer(t)
	config := map[string]any{"bearerToken": *api.token.Load(), "tlsClientConfig": map[string]any{"caData": api.caPEM()}}
	h := newHub(t, SecretsOptions{Format: ArgoCD})
	h.put("tenant", "cluster-evil", argoLabels(), argoSecret("evil", api.srv.URL, config))
	h.put(argoCDNamespace, "cluster-prod", argoLabels(), argoSecret("prod", api.srv.URL, config))
	eventually(t, "argocd/prod", func() bool { return h.fleet.Vault("argocd/prod") != nil })
	if got := strings.Join(h.fleet.Names(), ","); got != "argocd/prod" {
		t.Errorf("Names() = %s, want argocd/prod only", got)
	}

	elsewhere := newHub(t, SecretsOptions{Format: ArgoCD, Namespace: "gitops"})
	elsewhere.put("gitops", "cluster-prod", argoLabels(), argoSecret("prod", api.srv.URL, config))
	eventually(t, "gitops/prod", func() bool { return elsewhere.fleet.Vault("gitops/prod") != nil })
}
