package handlers_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// Through a vault: the server rejects the plugin's first token with a 401
// and a WWW-Authenticate challenge; the plugin's second run, with
// ProvideResponse, finds that response in KUBERNETES_EXEC_INFO, and the
// request goes through with the second token.
func TestExecProvideResponseThroughVault(t *testing.T) {
	const challenge = `Bearer realm="authvault-test", error="invalid_token"`
	for _, version := range []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"} {
		t.Run(version, func(t *testing.T) {
			var rejections atomic.Int64
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer plugin-token-2" {
					rejections.Add(1)
					w.Header().Set("WWW-Authenticate", challenge)
					http.Error(w, "Unauthorized", http.StatusUnauthorized)
					return
				}
				_, _ = io.WriteString(w, "ok")
			}))
			defer srv.Close()
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

			dir := t.TempDir()
			infoFile := filepath.Join(dir, "info")
			v := vault.New(vault.Options{NoFallback: true})
			defer v.Close()
			v.OnLogin(handlers.Exec(handlers.ExecConfig{
				ExecConfig: clientcmdapi.ExecConfig{
					Command: handlers.TestPluginPath(), APIVersion: version,
					InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
					Env: []clientcmdapi.ExecEnvVar{
						{Name: "PLUGIN_COUNTER", Value: filepath.Join(dir, "runs")},
						{Name: "PLUGIN_INFO_FILE", Value: infoFile},
					},
				},
				Cluster:         login.ConnectionInfo{Server: srv.URL, CAData: ca},
				ProvideResponse: true,
			}), login.ID("plugin"), login.Timeout(10*time.Second), login.Backoff(10*time.Millisecond, time.Second))

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := v.Select(ctx); err != nil {
				t.Fatal(err)
			}
			if spec := specOf(t, infoFile); spec["response"] != nil {
				t.Errorf("first login: spec = %v, want no response", spec)
			}

			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api", nil)
			resp, err := (&http.Client{Transport: v.Transport()}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || rejections.Load() != 1 {
				t.Fatalf("GET: %s after %d rejections, want 200 after one", resp.Status, rejections.Load())
			}
			want := map[string]any{
				"code":   float64(401),
				"header": map[string]any{"WWW-Authenticate": []any{challenge}},
			}
			if got := specOf(t, infoFile)["response"]; !reflect.DeepEqual(got, want) {
				t.Errorf("second run: spec.response = %v, want %v", got, want)
			}
		})
	}
}

// specOf is the spec of the KUBERNETES_EXEC_INFO the plugin wrote to path.
func specOf(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatalf("KUBERNETES_EXEC_INFO %s: %v", raw, err)
	}
	return info.Spec
}
