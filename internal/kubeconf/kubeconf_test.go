package kubeconf

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "s3cret-token-0123456789"

// Load names what is wrong and never repeats the content, in whatever form
// the parser quotes it.
func TestLoadQuotesNoContent(t *testing.T) {
	for _, data := range []string{
		"",
		"   \n",
		"users:\n- name: u\n  user: {{" + secret + ": x}: y}\n",
		"users: [" + secret + "\n",
		"users:\n- name: u\n  user:\n    token: [" + secret + "]\n",
		"users:\n- name: u\n  user:\n    client-key-data: " + secret + "!!\n",
		"a: *" + secret + "\n",
		"\t" + secret + ": x",
	} {
		_, err := Load([]byte(data))
		if err == nil {
			t.Errorf("Load(%q) gave no error", data)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Load(%q) = %v: it repeats the content", data, err)
		}
	}
	if _, err := Load([]byte("apiVersion: v1\nkind: Config\n")); err != nil {
		t.Errorf("a valid, empty kubeconfig: %v", err)
	}
}

// Connection with Inline refuses entries that name files, before it reads
// any; it runs no plugin it is not given.
func TestConnectionInline(t *testing.T) {
	cfg, err := Load([]byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://c.example", certificate-authority: /etc/hostname}}]
users: [{name: u, user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`))
	if err != nil {
		t.Fatal(err)
	}
	called := false
	plugins := Plugins{
		TokenFile: func(context.Context, string, login.ConnectionInfo) (*login.ConnectionInfo, error) {
			called = true
			return nil, nil
		},
	}
	_, err = Connection(context.Background(), Source{Config: cfg, Where: "Secret a/b", Inline: true, Policy: clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyDenyAll}}, plugins)
	var perm *login.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "tokenFile names a file of this machine") || !strings.Contains(err.Error(), "certificate-authority names a file") {
		t.Errorf("got %v", err)
	}
	if called {
		t.Error("the token file was read")
	}
}
