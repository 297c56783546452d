package handlers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// oneContext is a kubeconfig of one context, "c", on server, as user.
func oneContext(server string, user *clientcmdapi.AuthInfo) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = user
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "u", Namespace: "team-a"}
	cfg.CurrentContext = "c"
	return cfg
}

func TestKubeconfigMapsALoadedKubeconfig(t *testing.T) {
	info, err := Kubeconfig(KubeconfigConfig{Config: oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{Token: secretToken}), Name: "kubeconfig of tenant a"})(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Server != "https://api.example:6443" || info.Token != secretToken || info.DefaultNamespace != "team-a" || !info.Insecure {
		t.Errorf("credential = %v", info)
	}
}

// A kubeconfig from elsewhere may not name this machine's files, nor run a
// plugin unless its policy says so; with LoadingRules it is this machine's
// own, as a file kubectl reads.
func TestKubeconfigFromElsewhereIsNotTrustedAsAFile(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(secretToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withFile := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{TokenFile: tokenFile})
	_, err := Kubeconfig(KubeconfigConfig{Config: withFile, Name: "kubeconfig of tenant a"})(context.Background())
	var pe *login.PermanentError
	if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "kubeconfig of tenant a") || !strings.Contains(err.Error(), "tokenFile") {
		t.Errorf("tokenFile from elsewhere: %v, want a permanent error naming the source and the entry", err)
	}

	info, err := Kubeconfig(KubeconfigConfig{Config: withFile, LoadingRules: &clientcmd.ClientConfigLoadingRules{ExplicitPath: "/dev/null"}})(context.Background())
	if err != nil || info.Token != secretToken {
		t.Errorf("tokenFile with LoadingRules: %v, %v; want the file's token", info, err)
	}

	marker := filepath.Join(t.TempDir(), "ran")
	withExec := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		Command: "sh", Args: []string{"-c", "touch " + marker}, APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}})
	_, err = Kubeconfig(KubeconfigConfig{Config: withExec})(context.Background())
	if err == nil || !strings.Contains(err.Error(), "DenyAll") {
		t.Errorf("exec plugin, default policy: %v, want refused under DenyAll", err)
	}
	if _, statErr := os.Stat(marker); statErr == nil {
		t.Error("the plugin ran under the default policy")
	}
}

// The handler reads the caller's kubeconfig and never writes it: the policy
// it hands the exec plugin goes on a copy, so logins on several goroutines
// and the caller reading the config race with nothing (run under -race).
func TestKubeconfigLeavesTheConfigAsItWas(t *testing.T) {
	exec := &clientcmdapi.ExecConfig{Command: "sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	cfg := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{Exec: exec})
	h := Kubeconfig(KubeconfigConfig{Config: cfg, PluginPolicy: Allowlist("some-other-plugin")})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := h(context.Background()); err == nil || !strings.Contains(err.Error(), "not allowed") {
				t.Errorf("login: %v, want the plugin refused", err)
			}
			_ = cfg.AuthInfos["u"].Exec.PluginPolicy.PolicyType
		})
	}
	wg.Wait()
	if exec.PluginPolicy.PolicyType != "" {
		t.Errorf("the caller's exec entry now has policy %q", exec.PluginPolicy.PolicyType)
	}
}

func TestKubeconfigAndRESTConfigRefuseNothingToMap(t *testing.T) {
	for name, h := range map[string]login.Handler{
		"nil Config":      Kubeconfig(KubeconfigConfig{Name: "kubeconfig of tenant a"}),
		"nil rest.Config": RESTConfig(nil),
	} {
		info, err := h(context.Background())
		var pe *login.PermanentError
		if info != nil || !errors.As(err, &pe) {
			t.Errorf("%s: %v, %v; want a permanent error", name, info, err)
		}
	}
}

// Neither the handler's name nor its errors carry the server's user info or
// the token, whatever is wrong.
func TestKubeconfigAndRESTConfigErrorsHoldNoSecret(t *testing.T) {
	const password = "pa55-0123456789abcdef"
	server := "https://robot:" + password + "@api.example:6443"
	for name, h := range map[string]login.Handler{
		"kubeconfig server with user info": Kubeconfig(KubeconfigConfig{Config: oneContext(server, &clientcmdapi.AuthInfo{Token: secretToken})}),
		"kubeconfig missing context":       Kubeconfig(KubeconfigConfig{Config: oneContext(server, &clientcmdapi.AuthInfo{Token: secretToken}), Context: "nope"}),
		"rest.Config with user info":       RESTConfig(&rest.Config{Host: server, BearerToken: secretToken}),
	} {
		_, err := h(context.Background())
		for _, form := range []string{fmt.Sprint(err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			if err == nil || strings.Contains(form, password) || strings.Contains(form, secretToken) {
				t.Errorf("%s: %q", name, form)
			}
		}
	}
}

// An Allowlist without its PolicyType is a mistake client-go refuses: it is
// refused here too, not taken for the default (DenyAll for a kubeconfig from
// elsewhere, AllowAll for files).
func TestKubeconfigRefusesAnAllowlistWithoutItsType(t *testing.T) {
	policy := PluginPolicy{Allowlist: Allowlist("aws-iam-authenticator").Allowlist}
	cfg := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{Token: secretToken})
	for name, h := range map[string]login.Handler{
		"from elsewhere": Kubeconfig(KubeconfigConfig{Config: cfg, PluginPolicy: policy}),
		"from files":     Kubeconfig(KubeconfigConfig{Config: cfg, PluginPolicy: policy, LoadingRules: &clientcmd.ClientConfigLoadingRules{ExplicitPath: "/dev/null"}}),
	} {
		_, err := h(context.Background())
		var pe *login.PermanentError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "PluginPolicy") {
			t.Errorf("%s: %v, want a permanent error naming PluginPolicy", name, err)
		}
	}
}
