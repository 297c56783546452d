package piggyback

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/authvault/authvault/internal/testpki"
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
