package piggyback_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
)

// A kubeconfig's exec plugin and auth provider run only as its
// KubeconfigOptions.PluginPolicy allows; a refused one never runs.
func TestKubeconfigPluginPolicy(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: k, cluster: {server: "https://api.example:6443"}}]
contexts:
- {name: c, context: {cluster: k, user: plugin}}
- {name: p, context: {cluster: k, user: provider}}
users:
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: sh
      args: ["-c", "touch `+marker+`; echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'"]
      interactiveMode: Never
- name: provider
  user:
    auth-provider: {name: oidc, config: {idp-issuer-url: "https://issuer.example", client-id: "x", id-token: "y"}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		context string
		policy  handlers.PluginPolicy
		wantErr string
	}{
		{"exec under DenyAll", "c", handlers.DenyAll, `exec plugin "sh" is not allowed: plugin policy DenyAll`},
		{"exec not in the allowlist", "c", handlers.Allowlist("aws"), `plugin policy Allowlist does not list it`},
		{"auth provider under DenyAll", "p", handlers.DenyAll, `auth provider "oidc" is not allowed: plugin policy DenyAll`},
		{"exec in the allowlist", "c", handlers.Allowlist("sh"), ""},
		{"exec by default", "c", handlers.PluginPolicy{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(marker)
			_, err := piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: config, Context: tc.context, PluginPolicy: tc.policy})(context.Background())
			_, statErr := os.Stat(marker)
			if tc.wantErr == "" {
				if err != nil || statErr != nil {
					t.Errorf("error %v, plugin ran: %v; want it run", err, statErr == nil)
				}
				return
			}
			var perm *login.PermanentError
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &perm) || !strings.Contains(err.Error(), config) {
				t.Errorf("error = %v, want a permanent one naming the kubeconfig and %q", err, tc.wantErr)
			}
			if statErr == nil {
				t.Error("the refused plugin ran")
			}
		})
	}
}

// A refused plugin is refused at login whatever serves the kubeconfig: a
// user that impersonates (as:) is served by client-go's own transport, and
// the login succeeds now, with a credential whose every request fails
// ("plugin not allowed"), where the same user without as: is a permanent
// error naming the policy.
func TestKubeconfigRefusedPluginWithImpersonation(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: k, cluster: {server: "https://api.example:6443"}}]
contexts: [{name: c, context: {cluster: k, user: plugin}}]
users:
- name: plugin
  user:
    as: system:admin
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: sh
      args: ["-c", "touch `+marker+`"]
      interactiveMode: Never
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, policy := range map[string]handlers.PluginPolicy{"DenyAll": handlers.DenyAll, "Allowlist of another": handlers.Allowlist("other")} {
		info, err := piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: config, PluginPolicy: policy})(context.Background())
		var pe *login.PermanentError
		if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("%s: %v, %v; want a permanent refusal at login", name, info, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the plugin ran")
	}
}
