package handlers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// With ClusterOnly, a kubeconfig Secret gives its cluster and nothing of
// its credential: the plugin it names never runs, its token never leaves,
// and a cluster a credential should not go to is refused before
// ClusterOnly is called.
func TestKubeconfigSecretClusterOnly(t *testing.T) {
	ca := testpki.NewCA(t)
	caData := base64.StdEncoding.EncodeToString(ca.PEM)
	plugin := `{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/false}}`
	var got []login.ConnectionInfo
	only := func(_ context.Context, c login.ConnectionInfo) (*login.ConnectionInfo, error) {
		got = append(got, c)
		c.Token = "from-elsewhere"
		return &c, nil
	}
	for _, c := range []struct {
		name, kubeconfig, want string
	}{
		{"a token user", secretKubeconfig("https://wl.example:6443", caData, fmt.Sprintf("{token: %s}", secretToken)), ""},
		{"a plugin no policy allows", secretKubeconfig("https://wl.example:6443", caData, plugin), ""},
		{"plain http", secretKubeconfig("http://wl.example:6443", caData, "{}"), "not an https URL"},
		{"user info", secretKubeconfig("https://u:hunter2@wl.example", caData, "{}"), "not an https URL"},
		{"a CA file", strings.Replace(secretKubeconfig("https://wl.example", caData, "{}"), "certificate-authority-data: "+fmt.Sprintf("%q", caData), "certificate-authority: /etc/ca.crt", 1), "CA file"},
		{"no verification", strings.Replace(secretKubeconfig("https://wl.example", caData, "{}"), "server:", "insecure-skip-tls-verify: true, server:", 1), "skips TLS verification"},
		{"a proxy", strings.Replace(secretKubeconfig("https://wl.example", caData, "{}"), "server:", "proxy-url: http://proxy.example, server:", 1), "proxy-url"},
		{"no such context", strings.Replace(secretKubeconfig("https://wl.example", caData, "{}"), "current-context: wl-admin@wl", "current-context: other", 1), `no context "other"`},
	} {
		got = nil
		hub := hubWith(map[string][]byte{"value": []byte(c.kubeconfig)})
		info, err := KubeconfigSecretFrom(KubeconfigSecretConfig{Client: hub.CoreV1(), Namespace: "capi", Name: "wl-kubeconfig", ClusterOnly: only})(context.Background())
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) || !isPermanent(err) || len(got) != 0 {
				t.Errorf("%s: got %v (ClusterOnly called %d times), want a permanent error saying %q before ClusterOnly", c.name, err, len(got), c.want)
			}
			if err != nil && (strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "capi/wl-kubeconfig")) {
				t.Errorf("%s: the error shows a password or does not name the Secret: %v", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != 1 || got[0].Token != "" || got[0].Server != "https://wl.example:6443" || string(got[0].CAData) != string(ca.PEM) {
			t.Errorf("%s: ClusterOnly got %+v, want the cluster's server and CA and no credential", c.name, got)
		}
		if info.Token != "from-elsewhere" {
			t.Errorf("%s: the login gave %q, want ClusterOnly's credential", c.name, info.Token)
		}
	}
}

func isPermanent(err error) bool {
	_, ok := errors.AsType[*login.PermanentError](err)
	return ok
}
