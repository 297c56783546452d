package handlers

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// A plugin the policy does not allow never runs, and the error is
// permanent, naming the command and the policy.
func TestPluginPolicy(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		policy  PluginPolicy
		command string
		runs    bool
		wantErr string
	}{
		{"zero value", PluginPolicy{}, "sh", true, ""},
		{"AllowAll", AllowAll, "sh", true, ""},
		{"DenyAll", DenyAll, "sh", false, `"sh" is not allowed: plugin policy DenyAll`},
		{"Allowlist by name", Allowlist("sh"), "sh", true, ""},
		{"Allowlist by resolved path", Allowlist(sh), "sh", true, ""},
		{"Allowlist without it", Allowlist("aws"), "sh", false, `plugin policy Allowlist does not list it`},
		{"Allowlist nil", PluginPolicy{PolicyType: clientcmdapi.PluginPolicyAllowlist}, "sh", false, "allowlist is unspecified"},
		{"unknown type", PluginPolicy{PolicyType: "Maybe"}, "sh", false, "unknown plugin policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			_, err := Exec(ExecConfig{
				ExecConfig: clientcmdapi.ExecConfig{
					Command: tc.command, APIVersion: "client.authentication.k8s.io/v1",
					Args:            []string{"-c", `touch "$0"; echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}'`, marker},
					InteractiveMode: clientcmdapi.NeverExecInteractiveMode, PluginPolicy: tc.policy,
				},
				Cluster: login.ConnectionInfo{Server: "https://api.example"},
			})(context.Background())
			_, statErr := os.Stat(marker)
			if ran := statErr == nil; ran != tc.runs {
				t.Errorf("plugin ran = %v, want %v", ran, tc.runs)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("error = %v", err)
				}
				return
			}
			var perm *login.PermanentError
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &perm) {
				t.Errorf("error = %v, want a permanent one containing %q", err, tc.wantErr)
			}
		})
	}
}

// An Allowlist entry named by its bare name ("sh") allows that command as
// $PATH resolves it, not a file of that name under the working directory
// that a kubeconfig names with a relative path ("./sh", "x/../sh").
func TestAllowlistBareNameIsNotARelativePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, command := range []string{"./sh", "x/../sh", "sh/."} {
		if err := policyAllows(Allowlist("sh"), command); err == nil {
			t.Errorf("Allowlist(sh) allows %q, which runs %s", command, filepath.Join(dir, "sh"))
		}
	}
	if err := policyAllows(Allowlist("sh"), "sh"); err != nil {
		t.Errorf("Allowlist(sh) refuses sh: %v", err)
	}
}
