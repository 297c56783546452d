package piggyback

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// clientGoAuthorization is the Authorization header client-go sends for
// cfg: its own wrappers (exec plugin included) over a base round tripper
// that records the header and never touches the network.
func clientGoAuthorization(t *testing.T, cfg *rest.Config) (string, error) {
	t.Helper()
	var got string
	rt, err := rest.HTTPWrappersForConfig(cfg, roundTripFunc(func(req *http.Request) (*http.Response, error) {
		got = req.Header.Get("Authorization")
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	}))
	if err != nil {
		return "", err
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, cfg.Host+"/api", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return got, nil
}

// execInfo decodes the KUBERNETES_EXEC_INFO an echo-info plugin put in
// its token, as generic JSON.
func execInfo(t *testing.T, token string) map[string]any {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		t.Fatalf("token of an echo-info plugin: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("KUBERNETES_EXEC_INFO %s: %v", raw, err)
	}
	return v
}

// With provideClusterInfo, the cluster the plugin gets carries every field
// client-go sends (rest.ConfigToExecCluster: server, tls-server-name,
// insecure-skip-tls-verify, certificate-authority-data, proxy-url,
// disable-compression, config), with the same values: the same kubeconfig
// goes through the handler and through client-go's own transport.
func TestExecClusterInfoAsClientGoSendsIt(t *testing.T) {
	home := isolate(t)
	ca := testpki.NewCA(t)
	caPath := filepath.Join(home, "ca.crt")
	writeFile(t, caPath, string(ca.PEM))
	for _, insecure := range []bool{false, true} {
		t.Run(fmt.Sprintf("insecure=%v", insecure), func(t *testing.T) {
			tls := "certificate-authority: " + caPath
			if insecure {
				tls = "insecure-skip-tls-verify: true"
			}
			path := filepath.Join(t.TempDir(), "exec.yaml")
			writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster:
    server: https://api.example:6443
    %s
    tls-server-name: api.internal
    proxy-url: http://proxy.example:3128
    disable-compression: true
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {region: eu-west-1, audience: operator}
contexts:
- name: c
  context: {cluster: c, user: u}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      interactiveMode: Never
      provideClusterInfo: true
      env:
      - {name: PLUGIN_MODE, value: echo-info}
`, tls, pluginPath))
			info, err := KubeconfigFrom(KubeconfigOptions{Path: path})(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := clientcmdSays(t, &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, "")
			auth, err := clientGoAuthorization(t, cfg)
			if err != nil {
				t.Fatalf("client-go: %v", err)
			}
			got, want := execInfo(t, info.Token), execInfo(t, strings.TrimPrefix(auth, "Bearer "))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("KUBERNETES_EXEC_INFO:\n got %v\nwant %v (client-go's)", got, want)
			}
			cluster, _ := want["spec"].(map[string]any)["cluster"].(map[string]any)
			if cluster["disable-compression"] != true {
				t.Errorf("client-go sent cluster %v, want disable-compression in it", cluster)
			}
		})
	}
}

// A kubeconfig cluster with insecure-skip-tls-verify and a CA: client-go
// refuses to build a transport for it; the handler fails at login,
// permanently, naming the file, the context and the cluster.
func TestKubeconfigInsecureWithCAFailsAtLogin(t *testing.T) {
	home := isolate(t)
	ca := testpki.NewCA(t)
	caPath := filepath.Join(home, "ca.crt")
	writeFile(t, caPath, string(ca.PEM))
	for name, caLine := range map[string]string{
		"certificate-authority":      "certificate-authority: " + caPath,
		"certificate-authority-data": "certificate-authority-data: " + base64.StdEncoding.EncodeToString(ca.PEM),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "insecure.yaml")
			writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters:
- name: prod
  cluster:
    server: https://api.example:6443
    insecure-skip-tls-verify: true
    %s
contexts:
- name: c
  context: {cluster: prod, user: u}
users:
- name: u
  user: {token: kubeconfig-secret-token}
`, caLine))
			cfg, _ := clientcmdSays(t, &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, "")
			if _, err := rest.HTTPClientFor(cfg); err == nil {
				t.Fatal("client-go accepts the kubeconfig; the case expects it refused")
			}
			info, err := KubeconfigFrom(KubeconfigOptions{Path: path})(context.Background())
			var pe *login.PermanentError
			if err == nil || !errors.As(err, &pe) {
				t.Fatalf("KubeconfigFrom = %v, %v; want a permanent error", info, err)
			}
			for _, want := range []string{"piggyback: handlers: kubeconfig " + path, `context "c"`, `cluster "prod"`, "insecure-skip-tls-verify"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want it to name %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "kubeconfig-secret-token") {
				t.Errorf("error %q quotes the token", err)
			}
		})
	}
	// A rest.Config says so too.
	_, err := handlers.RESTConfig(&rest.Config{Host: "https://api.example:6443", TLSClientConfig: rest.TLSClientConfig{Insecure: true, CAData: ca.PEM}, BearerToken: "t"})(context.Background())
	var pe *login.PermanentError
	if err == nil || !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "handlers: rest.Config") {
		t.Errorf("RESTConfig error = %v, want a permanent one naming the rest.Config", err)
	}
}

// A kubeconfig user with exec and a token, basic auth or a client
// certificate: client-go authenticates with those and never runs the
// plugin (the exec authenticator steps aside when the transport has token,
// basic or certificate authentication); so does the handler.
func TestKubeconfigExecStepsAsideAsInClientGo(t *testing.T) {
	home := isolate(t)
	ca := testpki.NewCA(t)
	cert, key := ca.Issue(t, "operator", false)
	tokenPath := filepath.Join(home, "token")
	writeFile(t, tokenPath, "file-token")
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name, user string
		check      func(t *testing.T, info *login.ConnectionInfo, cfg *rest.Config)
	}{
		{"token", "token: kubeconfig-token", func(t *testing.T, info *login.ConnectionInfo, cfg *rest.Config) {
			if info.Token != "kubeconfig-token" {
				t.Errorf("token %q, want the kubeconfig's", info.Token)
			}
			if auth, err := clientGoAuthorization(t, cfg); err != nil || auth != "Bearer kubeconfig-token" {
				t.Errorf("client-go sent %q, %v; the case expects the kubeconfig's token", auth, err)
			}
		}},
		{"tokenFile", "tokenFile: " + tokenPath, func(t *testing.T, info *login.ConnectionInfo, cfg *rest.Config) {
			if info.Token != "file-token" {
				t.Errorf("token %q, want the file's", info.Token)
			}
			if auth, err := clientGoAuthorization(t, cfg); err != nil || auth != "Bearer file-token" {
				t.Errorf("client-go sent %q, %v; the case expects the file's token", auth, err)
			}
		}},
		{"basic auth", "{username: admin, password: kubeconfig-password}", func(t *testing.T, info *login.ConnectionInfo, cfg *rest.Config) {
			if info.Username != "admin" || info.Password != "kubeconfig-password" || info.Token != "" {
				t.Errorf("credential %v, want the kubeconfig's basic auth", info)
			}
			if auth, err := clientGoAuthorization(t, cfg); err != nil || !strings.HasPrefix(auth, "Basic ") {
				t.Errorf("client-go sent %q, %v; the case expects basic auth", auth, err)
			}
		}},
		{"client certificate", fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}", b64(cert), b64(key)), func(t *testing.T, info *login.ConnectionInfo, cfg *rest.Config) {
			if string(info.CertificateData) != string(cert) || string(info.PrivateKeyData) != string(key) || info.Token != "" {
				t.Errorf("credential %v, want the kubeconfig's certificate and no token", info)
			}
			tc, err := cfg.TransportConfig()
			if err != nil || !tc.HasCertAuth() || tc.HasCertCallback() {
				t.Errorf("client-go: certificate %v, callback %v, %v; the case expects the kubeconfig's certificate and no plugin's", tc.HasCertAuth(), tc.HasCertCallback(), err)
			}
			if auth, err := clientGoAuthorization(t, cfg); err != nil || auth != "" {
				t.Errorf("client-go sent %q, %v; the case expects no Authorization", auth, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			counter := filepath.Join(dir, "runs")
			path := filepath.Join(dir, "exec.yaml")
			user := "    " + tt.user
			if strings.HasPrefix(tt.user, "{") {
				user = "    " + strings.ReplaceAll(strings.Trim(tt.user, "{}"), ", ", "\n    ")
			}
			writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster: {server: "https://api.example:6443", certificate-authority-data: %s}
contexts:
- name: c
  context: {cluster: c, user: u}
users:
- name: u
  user:
%s
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      interactiveMode: Never
      env:
      - {name: PLUGIN_COUNTER, value: %s}
`, b64(ca.PEM), user, pluginPath, counter))
			info, err := KubeconfigFrom(KubeconfigOptions{Path: path})(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(counter); err == nil {
				t.Fatal("the handler ran the plugin")
			}
			cfg, _ := clientcmdSays(t, &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, "")
			tt.check(t, info, cfg)
			if _, err := os.Stat(counter); err == nil {
				t.Error("client-go ran the plugin; the case expects it never to")
			}
		})
	}
}
