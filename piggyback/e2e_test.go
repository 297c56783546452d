package piggyback_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "k8s.io/client-go/plugin/pkg/client/auth/oidc" // the oidc auth provider, as kubectl has it
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/vault"
)

// recorder is a TLS server that accepts bearer tokens with a prefix and
// records the Authorization headers it saw.
type recorder struct {
	srv  *httptest.Server
	ca   *testpki.CA
	mu   sync.Mutex
	auth []string
}

func newRecorder(t *testing.T, accept string) *recorder {
	t.Helper()
	r := &recorder{ca: testpki.NewCA(t)}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		a := req.Header.Get("Authorization")
		r.mu.Lock()
		r.auth = append(r.auth, a)
		r.mu.Unlock()
		if !strings.HasPrefix(a, "Bearer "+accept) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	r.srv.TLS = r.ca.ServerTLS(t, "api", nil)
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.auth...)
}

func getThrough(t *testing.T, v *vault.Vault, url string) int {
	t.Helper()
	resp, err := (&http.Client{Transport: v.Transport(), Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// An exec user of a kubeconfig, end to end: the plugin's tokens, with their
// expiry, reach the server through the vault.
func TestKubeconfigExecUserThroughAVault(t *testing.T) {
	home := piggyback.Isolate(t)
	srv := newRecorder(t, "plugin-token-")
	counter := filepath.Join(home, "runs")
	path := filepath.Join(home, "exec.yaml")
	piggyback.WriteFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: eks
clusters:
- name: eks
  cluster:
    server: %s
    certificate-authority-data: %s
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {region: eu-west-1}
contexts:
- name: eks
  context: {cluster: eks, user: plugin-user, namespace: apps}
users:
- name: plugin-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      interactiveMode: Never
      provideClusterInfo: true
      env:
      - {name: PLUGIN_TTL, value: 10m}
      - {name: PLUGIN_COUNTER, value: %s}
`, srv.srv.URL, base64.StdEncoding.EncodeToString(srv.ca.PEM), piggyback.PluginPath(), counter))

	v := vault.New(vault.Options{})
	defer v.Close()
	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path}), login.ID("kubeconfig"))
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if status := getThrough(t, v, cfg.Host+"/api/v1/namespaces"); status != 200 {
			t.Fatalf("GET = %d", status)
		}
	}
	cred, _ := v.Select(context.Background())
	if left := time.Until(cred.Info.Expiration); left < 9*time.Minute || v.Namespace() != "apps" {
		t.Errorf("credential expires in %v with namespace %q, want the plugin's 10m and the context's namespace", left, v.Namespace())
	}
	for _, a := range srv.seen() {
		if a != "Bearer plugin-token-1" {
			t.Errorf("server saw %q, want the plugin's first token on every request", a)
		}
	}
}

// An auth-provider user works through client-go's own transport.
func TestKubeconfigAuthProviderThroughAVault(t *testing.T) {
	home := piggyback.Isolate(t)
	idToken := testpki.NewSigner(t).JWT(t, map[string]any{"iss": "https://issuer.example", "exp": time.Now().Add(time.Hour).Unix()})
	srv := newRecorder(t, idToken)
	path := filepath.Join(home, "oidc.yaml")
	piggyback.WriteFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: sso
clusters: [{name: sso, cluster: {server: %s, certificate-authority-data: %s}}]
contexts: [{name: sso, context: {cluster: sso, user: u}}]
users:
- name: u
  user:
    auth-provider:
      name: oidc
      config: {client-id: operator, idp-issuer-url: "https://issuer.example", id-token: %s}
`, srv.srv.URL, base64.StdEncoding.EncodeToString(srv.ca.PEM), idToken))

	v := vault.New(vault.Options{})
	defer v.Close()
	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path}))
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if status := getThrough(t, v, cfg.Host+"/api"); status != 200 {
		t.Fatalf("GET = %d, server saw %q", status, srv.seen())
	}
	cred, _ := v.Select(context.Background())
	if cred.Info.Transport == nil {
		t.Error("an auth-provider credential has no transport of its own")
	}
}

// handlers.RESTConfig keeps client-go's transport for what only client-go does.
func TestRESTConfigKeepsClientGoTransport(t *testing.T) {
	srv := newRecorder(t, "wrapped-")
	wrapped := &rest.Config{
		Host:            srv.srv.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: srv.ca.PEM},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer wrapped-token")
				return rt.RoundTrip(r)
			})
		},
	}
	v := vault.New(vault.Options{})
	defer v.Close()
	v.OnLogin(handlers.RESTConfig(wrapped))
	if status := getThrough(t, v, srv.srv.URL+"/api"); status != 200 {
		t.Errorf("GET through WrapTransport = %d, server saw %q", status, srv.seen())
	}

	plain, err := handlers.RESTConfig(&rest.Config{Host: "api.example:6443", BearerToken: "t",
		TLSClientConfig: rest.TLSClientConfig{CAFile: "/ca.crt", CAData: srv.ca.PEM}})(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if plain.Server != "https://api.example:6443" || plain.Token != "t" || plain.CAPath != "" || len(plain.CAData) == 0 || plain.Transport != nil {
		t.Errorf("credential = %v, want the host made a URL, the token, and the CA data over the file", plain)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ClientGo follows controller-runtime's order.
func TestClientGoOrder(t *testing.T) {
	home := piggyback.Isolate(t)
	if info, err := piggyback.ClientGo(context.Background()); info != nil || err != nil {
		t.Fatalf("ClientGo() with nothing = %v, %v; want nil, nil", info, err)
	}
	kubeconfigFor(t, filepath.Join(home, ".kube", "config"), "https://home.example", "t")
	assertServer(t, "home", "https://home.example")
	piggyback.MountServiceAccount(t, "10.96.0.1", true)
	assertServer(t, "in-cluster beats home", "https://10.96.0.1:443")
	env := filepath.Join(home, "env.yaml")
	kubeconfigFor(t, env, "https://env.example", "t")
	t.Setenv("KUBECONFIG", env)
	assertServer(t, "$KUBECONFIG beats in-cluster", "https://env.example")
	flagged := filepath.Join(home, "flag.yaml")
	kubeconfigFor(t, flagged, "https://flag.example", "t")
	piggyback.SetFlag(t, flagged)
	assertServer(t, "--kubeconfig beats all", "https://flag.example")
}

func assertServer(t *testing.T, what, want string) {
	t.Helper()
	info, err := piggyback.ClientGo(context.Background())
	if err != nil || info == nil || info.Server != want {
		t.Errorf("%s: ClientGo() = %v, %v; want server %s", what, info, err, want)
	}
}
