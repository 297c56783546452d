package piggyback

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/authvault/authvault/login"
)

func flagValue() flag.Value { return flag.Lookup(KubeconfigFlag).Value }

// clientcmdSays is what client-go makes of a kubeconfig: the reference the
// parity test holds our handler to.
func clientcmdSays(t *testing.T, rules *clientcmd.ClientConfigLoadingRules, context string) (*rest.Config, string) {
	t.Helper()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		t.Fatalf("clientcmd: %v", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		t.Fatalf("clientcmd namespace: %v", err)
	}
	return cfg, ns
}

// Parity: for every kubeconfig of the corpus, the server, CA, client
// certificate, token, basic auth and namespace equal clientcmd's.
func TestKubeconfigParityWithClientcmd(t *testing.T) {
	c := newCorpus(t)
	tests := []struct {
		name    string
		paths   []string // $KUBECONFIG; a single one is also tried as the explicit path
		context string
		check   func(t *testing.T, info *login.ConnectionInfo)
	}{
		{"token", []string{"token.yaml"}, "", nil},
		{"token file, relative", []string{"tokenfile.yaml"}, "", func(t *testing.T, info *login.ConnectionInfo) {
			if info.Token != c.robotToken || info.RefreshAfter == 0 {
				t.Errorf("token %q read again after %v, want the file's token, reread", info.Token, info.RefreshAfter)
			}
		}},
		{"basic and insecure", []string{"basic.yaml"}, "", nil},
		{"certificate files, relative, one directory down", []string{"nested/certfiles.yaml"}, "", func(t *testing.T, info *login.ConnectionInfo) {
			if info.CertificatePath != c.path("certs/client.crt") || info.ProxyURL != "http://proxy.example:3128" {
				t.Errorf("certificate %q proxy %q, want the resolved path and the proxy", info.CertificatePath, info.ProxyURL)
			}
		}},
		{"certificate data", []string{"certdata.yaml"}, "", nil},
		{"another context", []string{"certdata.yaml"}, "other", nil},
		{"several files, first definition wins", []string{"multi-a.yaml", "multi-b.yaml"}, "", func(t *testing.T, info *login.ConnectionInfo) {
			if info.Server != "https://from-a.example" || info.Token != "token-from-a" || info.DefaultNamespace != "from-a" {
				t.Errorf("credential = %v, want a's definitions", info)
			}
		}},
		{"a context from the second file", []string{"multi-a.yaml", "multi-b.yaml"}, "b-context", nil},
	}
	for _, tt := range tests {
		var paths []string
		for _, p := range tt.paths {
			paths = append(paths, c.path(p))
		}
		env := strings.Join(paths, string(os.PathListSeparator))
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			t.Setenv("KUBECONFIG", env)
			info, err := KubeconfigFrom(KubeconfigOptions{Context: tt.context})(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cfg, ns := clientcmdSays(t, clientcmd.NewDefaultClientConfigLoadingRules(), tt.context)
			assertParity(t, info, cfg, ns)
			if tt.check != nil {
				tt.check(t, info)
			}
			if len(paths) == 1 {
				t.Setenv("KUBECONFIG", "")
				explicit, err := KubeconfigFrom(KubeconfigOptions{Path: paths[0], Context: tt.context})(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				assertParity(t, explicit, cfg, ns)
			}
		})
	}
}

func assertParity(t *testing.T, info *login.ConnectionInfo, cfg *rest.Config, namespace string) {
	t.Helper()
	u, _, _ := rest.DefaultServerUrlFor(cfg)
	token := cfg.BearerToken
	if cfg.BearerTokenFile != "" {
		token = strings.TrimSpace(token)
	}
	checks := []struct {
		field     string
		got, want any
	}{
		{"server", info.Server, u.String()},
		{"CA file", info.CAPath, cfg.CAFile},
		{"CA data", string(info.CAData), string(cfg.CAData)},
		{"certificate file", info.CertificatePath, cfg.CertFile},
		{"certificate data", string(info.CertificateData), string(cfg.CertData)},
		{"key file", info.PrivateKeyPath, cfg.KeyFile},
		{"key data", string(info.PrivateKeyData), string(cfg.KeyData)},
		{"token", info.Token, token},
		{"username", info.Username, cfg.Username},
		{"password", info.Password, cfg.Password},
		{"insecure", info.Insecure, cfg.Insecure},
		{"server name", info.TLSServerName, cfg.ServerName},
		{"namespace", info.DefaultNamespace, namespace},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, clientcmd says %v", c.field, c.got, c.want)
		}
	}
	if err := info.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}

func TestNoKubeconfigIsNothing(t *testing.T) {
	isolate(t)
	info, err := Kubeconfig(context.Background())
	if info != nil || err != nil {
		t.Errorf("Kubeconfig() without any = %v, %v; want nil, nil", info, err)
	}
}

func TestBrokenKubeconfigsNameFileAndEntry(t *testing.T) {
	c := newCorpus(t)
	tests := []struct {
		file, context string
		want          []string
	}{
		{"broken/bad-yaml.yaml", "", []string{"broken/bad-yaml.yaml"}},
		{"broken/no-current-context.yaml", "", []string{"broken/no-current-context.yaml", "no current-context is set"}},
		{"broken/missing-context.yaml", "", []string{"broken/missing-context.yaml", `context "gone" is not defined`}},
		{"broken/missing-cluster.yaml", "", []string{"broken/missing-cluster.yaml", `context "ctx" names cluster "nowhere", which is not defined`}},
		{"broken/missing-user.yaml", "", []string{"broken/missing-user.yaml", `context "ctx" names user "nobody", which is not defined`}},
		{"broken/missing-cert.yaml", "", []string{"broken/missing-cert.yaml", `user "u": client-certificate`, "no-such-dir/client.crt", `client-key`}},
		{"token.yaml", "absent", []string{"token.yaml", `context "absent" is not defined`}},
		{"no-such-file.yaml", "", []string{"no-such-file.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			isolate(t)
			_, err := KubeconfigFrom(KubeconfigOptions{Path: c.path(tt.file), Context: tt.context})(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %v, want it to contain %q", err, want)
				}
			}
			var pe *login.PermanentError
			if !errors.As(err, &pe) {
				t.Errorf("error %v is not permanent: retrying a broken file is pointless until it changes", err)
			}
		})
	}
}

// Secrets in a kubeconfig never reach an error about it.
func TestKubeconfigErrorsKeepSecrets(t *testing.T) {
	c := newCorpus(t)
	c.write(t, "secret-broken.yaml", strings.Replace(string(must(os.ReadFile(c.path("token.yaml")))), "current-context: dev", "current-context: nope", 1))
	_, err := KubeconfigFrom(KubeconfigOptions{Path: c.path("secret-broken.yaml")})(context.Background())
	if err == nil || strings.Contains(err.Error(), "alice-token") || bytes.Contains([]byte(err.Error()), c.key[30:60]) {
		t.Errorf("error = %v, want one without the token", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
