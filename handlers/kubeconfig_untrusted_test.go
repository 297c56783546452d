//go:build unix

package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// A kubeconfig from elsewhere that impersonates has client-go serve it
// (clientGoTransport), and client-go runs its plugin. Without `as:` the
// plugin is refused at login, permanently; with it the login succeeds and
// every request then fails ("plugin not allowed"): the vault holds a
// credential that can never authenticate. The refusal must not depend on
// which transport serves the config.
func TestKubeconfigImpersonatingPluginRefusedAtLogin(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	cfg := oneContext(srv.URL, &clientcmdapi.AuthInfo{Impersonate: "system:admin", Exec: &clientcmdapi.ExecConfig{
		Command: "sh", Args: []string{"-c", "touch " + marker}, APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}})
	for name, policy := range map[string]PluginPolicy{"default (DenyAll)": {}, "Allowlist of another": Allowlist("some-other-plugin")} {
		info, err := Kubeconfig(KubeconfigConfig{Config: cfg, Name: "kubeconfig of tenant a", PluginPolicy: policy})(context.Background())
		var pe *login.PermanentError
		if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("%s: login = %v, %v; want the plugin refused at login, permanently, as without impersonation", name, info, err)
		}
		if info != nil && info.Transport != nil {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			if resp, err := info.Transport.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the plugin ran")
	}
}

// Errors name cfg.Name, as the doc comment says; an entry's
// LocationOfOrigin (set by clientcmd.LoadFromFile) replaces it now, and a
// kubeconfig from elsewhere is then named by a path, its own name gone.
// The refusal also says "from a Secret" for a kubeconfig that is not one.
func TestKubeconfigErrorsNameCfgName(t *testing.T) {
	cfg := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{ClientKey: "key.pem"})
	cfg.Contexts["c"].LocationOfOrigin = "/home/alice/.kube/config"
	cfg.AuthInfos["u"].LocationOfOrigin = "/home/alice/.kube/config"
	_, err := Kubeconfig(KubeconfigConfig{Config: cfg, Name: "kubeconfig of tenant a"})(context.Background())
	if err == nil || !strings.Contains(err.Error(), "kubeconfig of tenant a") {
		t.Errorf("error = %v, want it to name %q", err, "kubeconfig of tenant a")
	}
	if err != nil && strings.Contains(err.Error(), "from a Secret") {
		t.Errorf("error = %v: this kubeconfig is not a Secret's", err)
	}
}

// Every field that names a file is refused for a kubeconfig from
// elsewhere, absolute or relative, before clientcmd opens it (a FIFO would
// block an open), whatever the policy; nothing is read.
func TestKubeconfigFromElsewhereNamesNoFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	for _, path := range []string{fifo, "relative/token", "../../var/run/secrets/kubernetes.io/serviceaccount/token"} {
		for field, set := range map[string]func(*clientcmdapi.Config){
			"certificate-authority": func(c *clientcmdapi.Config) {
				c.Clusters["k"].CertificateAuthority = path
				c.Clusters["k"].InsecureSkipTLSVerify = false
			},
			"client-certificate": func(c *clientcmdapi.Config) {
				c.AuthInfos["u"].ClientCertificate = path
				c.AuthInfos["u"].ClientKeyData = []byte("k")
			},
			"client-key": func(c *clientcmdapi.Config) {
				c.AuthInfos["u"].ClientKey = path
				c.AuthInfos["u"].ClientCertificateData = []byte("c")
			},
			"tokenFile": func(c *clientcmdapi.Config) { c.AuthInfos["u"].TokenFile = path },
		} {
			for _, policy := range []PluginPolicy{{}, AllowAll} {
				cfg := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{})
				set(cfg)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := Kubeconfig(KubeconfigConfig{Config: cfg, PluginPolicy: policy})(ctx)
				cancel()
				var pe *login.PermanentError
				if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), field+" names a file of this machine") {
					t.Errorf("%s %s, policy %q: %v, want it refused", field, path, policy.PolicyType, err)
				}
			}
		}
	}
}

// Secrets stay out of every error, in every form, also where clientcmd
// quotes a proxy-url or server it cannot use.
func TestKubeconfigErrorsQuoteNoSecret(t *testing.T) {
	const pw = "pw-0123456789SECRET"
	withProxy := func(p string) *clientcmdapi.Config {
		c := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{Token: secretToken})
		c.Clusters["k"].ProxyURL = p
		return c
	}
	execEnv := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		Command: "sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		Env: []clientcmdapi.ExecEnvVar{{Name: "AWS_WEB_IDENTITY_TOKEN_FILE", Value: pw}, {Name: "SECRET", Value: secretToken}},
	}})
	both := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{Token: secretToken, Username: "admin", Password: pw})
	for name, h := range map[string]login.Handler{
		"proxy-url of an unknown scheme":  Kubeconfig(KubeconfigConfig{Config: withProxy("ftp://u:" + pw + "@proxy:3128")}),
		"proxy-url without a scheme":      Kubeconfig(KubeconfigConfig{Config: withProxy("u:" + pw + "@proxy:3128")}),
		"proxy-url with a bad port":       Kubeconfig(KubeconfigConfig{Config: withProxy("http://u:" + pw + "@proxy:bad")}),
		"server with a bad port":          Kubeconfig(KubeconfigConfig{Config: oneContext("https://u:"+pw+"@api.example:bad", &clientcmdapi.AuthInfo{Token: secretToken})}),
		"server with a space":             Kubeconfig(KubeconfigConfig{Config: oneContext("https://u:"+pw+"@api example", &clientcmdapi.AuthInfo{Token: secretToken})}),
		"steering env under an Allowlist": Kubeconfig(KubeconfigConfig{Config: execEnv, PluginPolicy: Allowlist("sh")}),
		"token and basic auth":            Kubeconfig(KubeconfigConfig{Config: both}),
		"rest.Config without a scheme":    RESTConfig(&rest.Config{Host: "u:" + pw + "@api.example:6443", BearerToken: secretToken}),
	} {
		_, err := h(context.Background())
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		for _, form := range []string{err.Error(), fmt.Sprint(err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), fmt.Sprintf("%q", err)} {
			if strings.Contains(form, pw) || strings.Contains(form, secretToken) {
				t.Errorf("%s: %s", name, form)
			}
		}
	}
}

// Logins on several goroutines share the caller's configs and change
// neither (run under -race): a kubeconfig served by client-go
// (impersonation), with a plugin, and a rest.Config of each kind.
func TestKubeconfigAndRESTConfigShareConfigs(t *testing.T) {
	kc := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{Impersonate: "someone", Token: secretToken})
	kcPlugin := oneContext("https://api.example:6443", &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		Command: "sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		Env: []clientcmdapi.ExecEnvVar{{Name: "A", Value: "b"}},
	}})
	rc := &rest.Config{Host: "https://api.example:6443", BearerToken: secretToken, Impersonate: rest.ImpersonationConfig{UserName: "someone"}}
	rcPlain := &rest.Config{Host: "https://api.example:6443", Username: "u", Password: "p"}
	before := []string{fmt.Sprintf("%#v", *kc.AuthInfos["u"]), fmt.Sprintf("%#v", *kcPlugin.AuthInfos["u"].Exec), fmt.Sprintf("%#v", *rc), fmt.Sprintf("%#v", *rcPlain)}
	hs := []login.Handler{
		Kubeconfig(KubeconfigConfig{Config: kc}), Kubeconfig(KubeconfigConfig{Config: kcPlugin, PluginPolicy: Allowlist("other")}),
		RESTConfig(rc), RESTConfig(rcPlain),
	}
	var wg sync.WaitGroup
	for range 4 {
		for _, h := range hs {
			wg.Go(func() { _, _ = h(context.Background()) })
		}
	}
	wg.Wait()
	after := []string{fmt.Sprintf("%#v", *kc.AuthInfos["u"]), fmt.Sprintf("%#v", *kcPlugin.AuthInfos["u"].Exec), fmt.Sprintf("%#v", *rc), fmt.Sprintf("%#v", *rcPlain)}
	for i := range before {
		if before[i] != after[i] {
			t.Errorf("config %d changed:\n%s\n%s", i, before[i], after[i])
		}
	}
}

// What clientcmd makes of a kubeconfig held in memory, beside what the
// handler makes of it (clientcmd's client_config_test.go and
// validation_test.go cases: TestBasicAuthData, TestBasicTokenFile-like
// conflicts, TestCreateCleanDefault, TestProxyURL, TestModifyContext's
// namespace).
func TestKubeconfigAsClientcmdReadsIt(t *testing.T) {
	type outcome struct {
		fails                            bool
		server, token, user, sni, ns, px string
	}
	for _, tc := range []struct {
		name    string
		cluster clientcmdapi.Cluster
		user    clientcmdapi.AuthInfo
		ns      string
		differs string // why the handler differs on purpose; then want is the handler's
		want    outcome
	}{
		{name: "token", cluster: clientcmdapi.Cluster{Server: "https://a.example:6443"}, user: clientcmdapi.AuthInfo{Token: "t"}},
		{name: "basic auth", cluster: clientcmdapi.Cluster{Server: "https://a.example"}, user: clientcmdapi.AuthInfo{Username: "u", Password: "p"}, ns: "x"},
		{name: "token and basic auth", cluster: clientcmdapi.Cluster{Server: "https://a.example"}, user: clientcmdapi.AuthInfo{Token: "t", Username: "u"}},
		{name: "tls-server-name and proxy", cluster: clientcmdapi.Cluster{Server: "https://a.example", TLSServerName: "b.example", ProxyURL: "socks5://p.example:1080"}, user: clientcmdapi.AuthInfo{Token: "t"}},
		{name: "no scheme", cluster: clientcmdapi.Cluster{Server: "a.example:6443"}, user: clientcmdapi.AuthInfo{Token: "t"},
			differs: "client-go takes it for plain http", want: outcome{fails: true}},
		{name: "plain http drops the token", cluster: clientcmdapi.Cluster{Server: "http://a.example"}, user: clientcmdapi.AuthInfo{Token: "t"}},
		{name: "no server", cluster: clientcmdapi.Cluster{InsecureSkipTLSVerify: true}, user: clientcmdapi.AuthInfo{Token: "t"}},
	} {
		cfg := clientcmdapi.NewConfig()
		c, u := tc.cluster, tc.user
		cfg.Clusters["k"], cfg.AuthInfos["u"] = &c, &u
		cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "u", Namespace: tc.ns}
		cfg.CurrentContext = "c"

		want := tc.want
		if tc.differs == "" {
			cc := clientcmd.NewNonInteractiveClientConfig(*cfg.DeepCopy(), "", &clientcmd.ConfigOverrides{}, nil)
			rc, err := cc.ClientConfig()
			if err != nil {
				want = outcome{fails: true}
			} else {
				ns, _, _ := cc.Namespace()
				u, _, _ := rest.DefaultServerUrlFor(rc)
				want = outcome{server: u.String(), token: rc.BearerToken, user: rc.Username, sni: rc.ServerName, ns: ns, px: tc.cluster.ProxyURL}
			}
		}
		info, err := Kubeconfig(KubeconfigConfig{Config: cfg})(context.Background())
		got := outcome{fails: err != nil}
		if err == nil {
			got = outcome{server: info.Server, token: info.Token, user: info.Username, sni: info.TLSServerName, ns: info.DefaultNamespace, px: info.ProxyURL}
		}
		if got != want {
			t.Errorf("%s: handler %+v, clientcmd %+v (err %v)", tc.name, got, want, err)
		}
	}
}
