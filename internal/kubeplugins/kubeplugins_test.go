package kubeplugins

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The plugins are handlers': the exec plugin honours its policy, the token
// file is read.
func TestPlugins(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	_, err := Plugins.Exec(context.Background(), clientcmdapi.ExecConfig{
		Command: "sh", Args: []string{"-c", "touch " + marker}, APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode, PluginPolicy: clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyDenyAll},
	}, login.ConnectionInfo{Server: "https://c.example"}, false)
	if err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("Exec under DenyAll: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the plugin ran")
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := Plugins.TokenFile(context.Background(), token, login.ConnectionInfo{Server: "https://c.example"})
	if err != nil || info.Token != "file-token" {
		t.Errorf("TokenFile: %v, %v", info, err)
	}
}
