package piggyback_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
)

// A kubeconfig that only client-go's own transport can serve (it
// impersonates) and whose user runs a plugin a native login serves: the
// native login gives the token, which client-go's transport sends beside
// the impersonation headers, and its expiry is the credential's; the
// plugin (which would leave a marker) never runs, where before the change
// client-go ran it. A policy that does not allow the native login refuses
// it, before anything is asked.
func TestNativeServesKubeconfigsOnlyClientGoCanServe(t *testing.T) {
	expiry := time.Now().Add(time.Hour).Truncate(time.Second)
	var mu sync.Mutex
	var asked []handlers.NativeRequest
	handlers.UseNative(handlers.Native{
		Name:   "fake",
		Serves: func(exec clientcmdapi.ExecConfig) bool { return filepath.Base(exec.Command) == "fake-cloud" },
		Handler: func(req handlers.NativeRequest) (login.Handler, error) {
			mu.Lock()
			asked = append(asked, req)
			mu.Unlock()
			return func(context.Context) (*login.ConnectionInfo, error) {
				return &login.ConnectionInfo{Token: "native-token", Expiration: expiry}, nil
			}, nil
		},
	})
	t.Cleanup(func() { handlers.UseNative(handlers.Native{Name: "fake"}) }) // serves nothing

	type seen struct{ auth, as string }
	got := make(chan seen, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Header.Get("Authorization"), r.Header.Get("Impersonate-User")}
	}))
	defer srv.Close()

	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	plugin := filepath.Join(dir, "fake-cloud")
	script := "#!/bin/sh\ntouch " + marker + "\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-plugin\"}}'\n"
	if err := os.WriteFile(plugin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: srv.URL, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{
		Impersonate: "someone-else",
		Exec: &clientcmdapi.ExecConfig{Command: plugin, APIVersion: "client.authentication.k8s.io/v1",
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode},
	}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}

	info, err := piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path})(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Transport == nil || !info.Expiration.Equal(expiry) || info.Token != "" {
		t.Fatalf("got transport %v, expiration %v, token set %t: want client-go's transport and the native login's expiry",
			info.Transport != nil, info.Expiration, info.Token != "")
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := info.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := <-got; s.auth != "Bearer native-token" || s.as != "someone-else" {
		t.Errorf("the server got Authorization %q and Impersonate-User %q, want the native token and the impersonation", s.auth, s.as)
	}
	mu.Lock()
	n := len(asked)
	mu.Unlock()
	if n != 1 || asked[0].Cluster.Server != srv.URL || !asked[0].Cluster.Insecure || asked[0].Untrusted {
		t.Errorf("the native login was asked %d times (%+v), want once, for the kubeconfig's cluster, trusted", n, asked)
	}

	_, err = piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path, PluginPolicy: handlers.DenyAll})(context.Background())
	if err == nil || !strings.Contains(err.Error(), "AllowNative") {
		t.Errorf("under DenyAll: %v, want the native login refused, naming handlers.AllowNative", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the plugin ran")
	}
}
