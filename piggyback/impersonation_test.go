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
