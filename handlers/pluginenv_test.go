package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// corpAuth writes an allowlisted plugin of the kind operators run: a bash
// script that prints a token with echo. It returns its path and the file
// that code injected into it would create.
func corpAuth(t *testing.T) (plugin, marker string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash is needed to show the attack: %v", err)
	}
	dir := t.TempDir()
	plugin = filepath.Join(dir, "corp-auth")
	script := "#!/bin/bash\necho '" + `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"corp-token"}}` + "'\n"
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return plugin, filepath.Join(dir, "pwned")
}

func runCorpAuth(plugin string, policy PluginPolicy, env ...clientcmdapi.ExecEnvVar) (*login.ConnectionInfo, error) {
	return Exec(ExecConfig{
		ExecConfig: clientcmdapi.ExecConfig{
			Command: plugin, APIVersion: "client.authentication.k8s.io/v1", Env: env,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode, PluginPolicy: policy,
		},
		Cluster: login.ConnectionInfo{Server: "https://api.example"},
	})(context.Background())
}

// Issue 20, item 1: an allowlisted bash plugin ran the commands a Secret's
// exec env defined (an exported function named like a command it calls,
// BASH_ENV's command substitution). Under an Allowlist the plugin does not
// run at all; the error names the variable, never its value.
func TestAllowlistedPluginCannotBeSteeredByItsEnv(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"BASH_FUNC_echo%%", "() { touch %s; }"},
		{"BASH_ENV", "$(touch %s)"},
		{"ENV", "$(touch %s)"},
		{"SHELLOPTS", "xtrace"}, // with PS4 below: the pair runs code
		{"PS4", "$(touch %s)"},
		{"PATH", "/tmp/evil:%s"},
		{"LD_PRELOAD", "%s.so"},
		{"ld_preload", "%s.so"}, // names compare without case
		{"PYTHONSTARTUP", "%s"},
		{"NODE_OPTIONS", "--require %s"},
		{"CLOUDSDK_PYTHON", "%s"},
		{"AWS_CONFIG_FILE", "/proc/self/environ"},
		{"GLIBC_TUNABLES", "glibc.tune.hwcaps=%s"},
		{"A%B", "x"},
		{"1ABC", "x"},
		{"", "x"},
		{"NOTE", "line one\n[default]\ncredential_process = touch %s"},
		{"NUL", "a\x00b"},
		// What sends this process's own secrets where the Secret's writer
		// chooses: the AWS SDKs post the web identity token (a file: the
		// pod's ServiceAccount token will do) to the STS endpoint, and the
		// container token to any https FULL_URI; kubelogin's workload
		// identity posts the federated token to the authority host; gcloud
		// (run by gke-gcloud-auth-plugin) prints an access token file as
		// the credential the Secret's server then gets, and takes every
		// property (token host, endpoints, proxy, CA) from CLOUDSDK_*.
		{"AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
		{"AWS_ENDPOINT_URL", "https://sts.evil.example"},
		{"AWS_ENDPOINT_URL_STS", "https://sts.evil.example"},
		{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "https://evil.example/creds"},
		{"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
		{"AZURE_FEDERATED_TOKEN_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
		{"AZURE_AUTHORITY_HOST", "https://evil.example/"},
		{"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
		{"CLOUDSDK_AUTH_TOKEN_HOST", "https://evil.example/token"},
		// A plain-http proxy sees the instance metadata and EKS Pod
		// Identity requests and answers in clear (Go's and Python's proxy
		// rules leave only loopback out); trust roots pick whom TLS trusts.
		{"HTTP_PROXY", "http://evil.example:3128"},
		{"http_proxy", "http://evil.example:3128"},
		{"ALL_PROXY", "http://evil.example:3128"},
		{"SSL_CERT_FILE", "/tmp/evil-ca.pem"},
		{"AWS_CA_BUNDLE", "/tmp/evil-ca.pem"},
		{"REQUESTS_CA_BUNDLE", "/tmp/evil-ca.pem"},
		// Go's http2debug=2 prints every header a Go plugin sends, its
		// Authorization too, to the stderr this process logs; Python and
		// curl write TLS session keys to SSLKEYLOGFILE.
		{"GODEBUG", "http2debug=2"},
		{"SSLKEYLOGFILE", "/dev/stderr"},
		// glibc's own list of what a program run across a privilege
		// boundary must not be given (unsecvars.h), beyond LD_*.
		{"GETCONF_DIR", "%s"},
		{"LOCALDOMAIN", "evil.example"},
		{"RES_OPTIONS", "ndots:15"},
		{"RESOLV_HOST_CONF", "%s"},
		{"NIS_PATH", "%s"},
		{"TMPDIR", "%s"},
		{"TZDIR", "%s"},
		{"AWS_PAGER", "touch %s"},
		{"CURL_HOME", "%s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plugin, marker := corpAuth(t)
			value := strings.ReplaceAll(tc.value, "%s", marker)
			_, err := runCorpAuth(plugin, Allowlist(plugin), clientcmdapi.ExecEnvVar{Name: tc.name, Value: value})
			if _, statErr := os.Stat(marker); statErr == nil {
				t.Fatal("the Secret's env ran its code in the plugin")
			}
			var perm *login.PermanentError
			if err == nil || !errors.As(err, &perm) {
				t.Fatalf("error = %v, want a permanent refusal", err)
			}
			if msg := fmt.Sprintf("%v %+v %#v", err, err, err); !strings.Contains(msg, fmt.Sprintf("env %q is not allowed", tc.name)) ||
				strings.Contains(msg, marker) || strings.Contains(msg, value) && value != "x" {
				t.Errorf("error = %q: want it to name %q and not to quote the value", err, tc.name)
			}
		})
	}
}

// The attack works without the check: under AllowAll (a kubeconfig file,
// client-go's default) the env reaches the plugin as client-go passes it.
// This is what the Allowlist now refuses.
func TestAllowAllPassesTheEnvAsClientGoDoes(t *testing.T) {
	plugin, marker := corpAuth(t)
	info, err := runCorpAuth(plugin, AllowAll, clientcmdapi.ExecEnvVar{Name: "BASH_FUNC_echo%%", Value: "() { touch " + marker + "; builtin echo \"$@\"; }"})
	if err != nil || info.Token != "corp-token" {
		t.Fatalf("AllowAll: %v, %v", info, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("under AllowAll the exported function did not run (%v): the attack test above proves nothing", err)
	}
}

// What plugins are given in Secrets (a profile, a region, a client id)
// still reaches an allowlisted plugin, beside this process's environment.
func TestAllowlistedPluginGetsPlainEnv(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "corp-auth")
	script := "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s-%s-%s\"}}' \"$AWS_PROFILE\" \"$AZURE_TENANT_ID\" \"$FROM_PROCESS\"\n"
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FROM_PROCESS", "own")
	info, err := runCorpAuth(plugin, Allowlist(plugin),
		clientcmdapi.ExecEnvVar{Name: "AWS_PROFILE", Value: "prod"}, clientcmdapi.ExecEnvVar{Name: "AZURE_TENANT_ID", Value: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.Token, "prod-t1-own"; got != want {
		t.Errorf("token = %q, want %q", got, want)
	}
}

// The same refusal through a kubeconfig kept in a Secret, the way it
// reaches an operator: the handler's error names the Secret and the
// variable, and the plugin does not run.
func TestKubeconfigSecretPluginEnvIsChecked(t *testing.T) {
	plugin, marker := corpAuth(t)
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://api.example"}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      interactiveMode: Never
      env: [{name: "BASH_FUNC_echo%%%%", value: "() { touch %s; }"}]
`, plugin, marker)
	client := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "prod-kubeconfig"},
		Data:       map[string][]byte{"value": []byte(kubeconfig)},
	})
	_, err := KubeconfigSecretFrom(KubeconfigSecretConfig{Client: client.CoreV1(), Namespace: "capi", Name: "prod-kubeconfig", PluginPolicy: Allowlist(plugin)})(context.Background())
	if _, statErr := os.Stat(marker); statErr == nil {
		t.Fatal("the Secret's env ran its code in the plugin")
	}
	if err == nil || !strings.Contains(err.Error(), `env "BASH_FUNC_echo%%" is not allowed`) || !strings.Contains(err.Error(), "capi/prod-kubeconfig") {
		t.Errorf("error = %v, want one naming the Secret and the variable", err)
	}
}

// A kubeconfig whose user impersonates (as:, as-groups:) keeps client-go's
// own transport, and client-go's exec authenticator then runs the plugin
// itself, at the first request, outside Exec: the env check must hold
// there too. It did not: the allowlisted plugin ran the Secret's function.
func TestKubeconfigSecretImpersonatingPluginEnvIsChecked(t *testing.T) {
	plugin, marker := corpAuth(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users:
- name: u
  user:
    as: someone
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      interactiveMode: Never
      env: [{name: "BASH_FUNC_echo%%%%", value: "() { touch %s; builtin echo \"$@\"; }"}]
`, srv.URL, plugin, marker)
	client := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "prod-kubeconfig"},
		Data:       map[string][]byte{"value": []byte(kubeconfig)},
	})
	info, err := KubeconfigSecretFrom(KubeconfigSecretConfig{Client: client.CoreV1(), Namespace: "capi", Name: "prod-kubeconfig", PluginPolicy: Allowlist(plugin)})(context.Background())
	if err == nil && info.Transport != nil {
		// What the vault does with the credential: send a request.
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if resp, err := info.Transport.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	if _, statErr := os.Stat(marker); statErr == nil {
		t.Fatal("the Secret's env ran its code in the plugin client-go ran")
	}
	if err == nil || !strings.Contains(err.Error(), `env "BASH_FUNC_echo%%" is not allowed`) || !strings.Contains(err.Error(), "capi/prod-kubeconfig") {
		t.Errorf("error = %v, want one naming the Secret and the variable", err)
	}
}

// A name with "=" in it carries a value (the plugin gets NAME=rest=value):
// the error quotes what comes before the "=", never what follows; and a
// name of a megabyte is cut short.
func TestPluginEnvErrorQuotesNoValueInTheName(t *testing.T) {
	plugin, _ := corpAuth(t)
	for _, tc := range []struct{ name, leak, want string }{
		{"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI", "wJalrXUtnFEMI", `env "AWS_SECRET_ACCESS_KEY=…" is not allowed`},
		{strings.Repeat("A", 1<<20) + "%", strings.Repeat("A", 200), "is not allowed"},
	} {
		_, err := runCorpAuth(plugin, Allowlist(plugin), clientcmdapi.ExecEnvVar{Name: tc.name, Value: "x"})
		if err == nil {
			t.Fatalf("%.40s: the plugin ran", tc.name)
		}
		if msg := fmt.Sprintf("%v %+v %#v", err, err, err); strings.Contains(msg, tc.leak) || !strings.Contains(msg, tc.want) {
			t.Errorf("%.40s: error = %.300q, want %q and not %.40q", tc.name, err, tc.want, tc.leak)
		}
	}
}
