package handlers

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/pkg/apis/clientauthentication"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// TestClientGoExecParity holds handlers.Exec to client-go's own exec
// authenticator: the cases of client-go's exec plugin tests (TestRefreshCreds
// and the like), rewritten here as facts — a config, a terminal or not, what
// the plugin prints and how it exits — and each run through both, on the same
// plugin. Where both succeed they must agree on the credential and on the
// KUBERNETES_EXEC_INFO the plugin got; where both fail, each error must say
// what the case says. A case with differs set is one where the project
// differs on purpose (see the package documentation): client-go's outcome is
// checked as the case states it, and the project's as the case wants it.
func TestClientGoExecParity(t *testing.T) {
	cert, key := testpki.KeyPair(t)
	ca := testpki.NewCA(t)
	const (
		v1      = "client.authentication.k8s.io/v1"
		v1beta1 = "client.authentication.k8s.io/v1beta1"
	)
	cred := func(version, status string) string {
		return fmt.Sprintf(`{"kind":"ExecCredential","apiVersion":%q,"status":%s}`, version, status)
	}
	token := func(version string) string { return cred(version, `{"token":"foo-bar"}`) }
	cfg := func(version string, mode clientcmdapi.ExecInteractiveMode) clientcmdapi.ExecConfig {
		return clientcmdapi.ExecConfig{APIVersion: version, InteractiveMode: mode}
	}
	unavailable := func(c clientcmdapi.ExecConfig, message string) clientcmdapi.ExecConfig {
		c.StdinUnavailable, c.StdinUnavailableMessage = true, message
		return c
	}
	withClusterInfo := func(c clientcmdapi.ExecConfig) clientcmdapi.ExecConfig {
		c.ProvideClusterInfo = true
		return c
	}
	pluginConfig := &runtime.Unknown{Raw: []byte(`{"apiVersion":"group/v1","kind":"PluginConfig","spec":{"audience":"snorlax"}}`), ContentType: runtime.ContentTypeJSON}
	cluster := &login.ConnectionInfo{Server: "https://foo", TLSServerName: "bar", CAData: ca.PEM}

	tests := []struct {
		name     string
		config   clientcmdapi.ExecConfig
		cluster  *login.ConnectionInfo // with config.Config as the extension
		terminal bool
		output   string
		exitCode int

		// Success: the credential, and what KUBERNETES_EXEC_INFO said.
		wantToken       string
		wantCert        bool
		wantExpiry      time.Time
		wantInteractive bool
		wantCluster     bool
		// Failure: what each error says.
		wantErr, clientGoErr string

		// differs says why the project differs on purpose; client-go then
		// gives clientGoToken where the project gives wantErr.
		differs       string
		clientGoToken string
	}{
		{name: "beta, TLS credentials", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode),
			output: cred(v1beta1, fmt.Sprintf(`{"clientKeyData":%q,"clientCertificateData":%q}`, key, cert)), wantCert: true},
		{name: "beta, bad TLS credentials", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode),
			output:  cred(v1beta1, `{"clientKeyData":"foo","clientCertificateData":"bar"}`),
			wantErr: "no PEM key pair", clientGoErr: "failed parsing client key/certificate"},
		{name: "beta, certificate without key", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode),
			output:  cred(v1beta1, fmt.Sprintf(`{"clientCertificateData":%q}`, cert)),
			wantErr: "client certificate without its key", clientGoErr: "only certificate or key"},
		{name: "beta, key without certificate", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode),
			output:  cred(v1beta1, fmt.Sprintf(`{"clientKeyData":%q}`, key)),
			wantErr: "client key without its certificate", clientGoErr: "only certificate or key"},
		{name: "beta, token", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode), output: token(v1beta1), wantToken: "foo-bar"},
		{name: "beta, Never", config: cfg(v1beta1, clientcmdapi.NeverExecInteractiveMode), output: token(v1beta1), wantToken: "foo-bar"},
		{name: "beta, Never, stdin unavailable", config: unavailable(cfg(v1beta1, clientcmdapi.NeverExecInteractiveMode), ""),
			output: token(v1beta1), wantToken: "foo-bar"},
		{name: "beta, IfAvailable, stdin unavailable", config: unavailable(cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode), ""),
			output: token(v1beta1), wantToken: "foo-bar"},
		{name: "beta, IfAvailable, terminal", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode), terminal: true,
			output: token(v1beta1), wantToken: "foo-bar", wantInteractive: true},
		{name: "beta, IfAvailable, terminal, stdin unavailable", config: unavailable(cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode), ""),
			terminal: true, output: token(v1beta1), wantToken: "foo-bar"},
		{name: "beta, Always, no terminal", config: cfg(v1beta1, clientcmdapi.AlwaysExecInteractiveMode),
			wantErr: "stdin is not a terminal", clientGoErr: "standard input is not a terminal"},
		{name: "beta, Always, terminal, stdin unavailable", config: unavailable(cfg(v1beta1, clientcmdapi.AlwaysExecInteractiveMode), ""),
			terminal: true, wantErr: "standard input is unavailable", clientGoErr: "standard input is unavailable"},
		{name: "beta, Always, terminal, stdin unavailable with a message", config: unavailable(cfg(v1beta1, clientcmdapi.AlwaysExecInteractiveMode), "some message"),
			terminal: true, wantErr: "standard input is unavailable: some message", clientGoErr: "standard input is unavailable: some message"},
		{name: "beta, Always, terminal", config: cfg(v1beta1, clientcmdapi.AlwaysExecInteractiveMode), terminal: true,
			output: token(v1beta1), wantToken: "foo-bar", wantInteractive: true},
		{name: "beta, expiry", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode),
			output:    cred(v1beta1, `{"token":"foo-bar","expirationTimestamp":"2006-01-02T15:04:05Z"}`),
			wantToken: "foo-bar", wantExpiry: time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)},
		{name: "beta, no apiVersion", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode),
			output: `{"kind":"ExecCredential","status":{"token":"foo-bar"}}`, wantErr: "output has apiVersion none", clientGoErr: "plugin returned version"},
		{name: "beta, no status", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode),
			output: `{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1"}`, wantErr: "output has no status", clientGoErr: "didn't return a status"},
		{name: "beta, empty status", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode),
			output: cred(v1beta1, `{}`), wantErr: "neither a token nor a client certificate", clientGoErr: "didn't return a token or cert/key pair"},
		{name: "unknown binary", config: clientcmdapi.ExecConfig{APIVersion: v1beta1, Command: "does not exist", InstallHint: "some install hint",
			InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode}, wantErr: "some install hint", clientGoErr: "some install hint"},
		{name: "binary fails", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode), exitCode: 73,
			wantErr: "exited with code 73", clientGoErr: "failed with exit code 73"},
		{name: "beta, cluster info provided", config: withClusterInfo(cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode)), cluster: cluster,
			output: token(v1beta1), wantToken: "foo-bar", wantCluster: true},
		{name: "beta, cluster info not provided", config: cfg(v1beta1, clientcmdapi.IfAvailableExecInteractiveMode), cluster: cluster,
			output: token(v1beta1), wantToken: "foo-bar"},
		{name: "v1, cluster info provided", config: withClusterInfo(cfg(v1, clientcmdapi.NeverExecInteractiveMode)), cluster: cluster,
			output: token(v1), wantToken: "foo-bar", wantCluster: true},
		{name: "v1, token", config: cfg(v1, clientcmdapi.IfAvailableExecInteractiveMode), output: token(v1), wantToken: "foo-bar"},
		{name: "v1, no interactiveMode", config: cfg(v1, ""), wantErr: "interactiveMode must be set", clientGoErr: `unknown interactiveMode: ""`},
		{name: "v1, wrong apiVersion", config: cfg(v1, clientcmdapi.NeverExecInteractiveMode), output: token(v1beta1),
			wantErr: `output has apiVersion "client.authentication.k8s.io/v1beta1"`, clientGoErr: "plugin returned version"},
		{name: "v1, field names are case-sensitive", config: cfg(v1, clientcmdapi.NeverExecInteractiveMode),
			output: cred(v1, `{"Token":"foo-bar"}`), wantErr: "neither a token nor a client certificate", clientGoErr: "didn't return a token"},
		{name: "v1, unknown fields are ignored", config: cfg(v1, clientcmdapi.NeverExecInteractiveMode),
			output: cred(v1, `{"token":"foo-bar","refreshToken":"x"}`), wantToken: "foo-bar"},

		{name: "v1, YAML output", config: cfg(v1, clientcmdapi.NeverExecInteractiveMode),
			output:  "apiVersion: client.authentication.k8s.io/v1\nkind: ExecCredential\nstatus:\n  token: foo-bar\n",
			differs: "JSON only: the protocol says the plugin prints JSON; client-go's decoder also takes YAML",
			wantErr: "output is not a JSON object", clientGoToken: "foo-bar"},
		{name: "v1, no kind", config: cfg(v1, clientcmdapi.NeverExecInteractiveMode),
			output:  `{"apiVersion":"client.authentication.k8s.io/v1","status":{"token":"foo-bar"}}`,
			differs: "kind is required: client-go takes the kind from the object it decodes into",
			wantErr: "output has kind none", clientGoToken: "foo-bar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdin = devNull(t)
			if tt.terminal {
				stdin = terminal(t)
			}
			config := tt.config
			var cgCluster *clientauthentication.Cluster
			var c login.ConnectionInfo
			if tt.cluster != nil {
				c = *tt.cluster
				config.Config = pluginConfig
				cgCluster = &clientauthentication.Cluster{Server: c.Server, TLSServerName: c.TLSServerName, InsecureSkipTLSVerify: c.Insecure,
					CertificateAuthorityData: c.CAData, ProxyURL: c.ProxyURL, Config: pluginConfig}
			}

			// client-go, two requests and a TLS handshake's certificate:
			// an expired credential makes it run the plugin for each.
			cgPlugin := newReplay(t, tt.output, tt.exitCode)
			cg := viaClientGo(t, cgPlugin.config(config), cgCluster, stdin, 2)
			// the project
			plugin := newReplay(t, tt.output, tt.exitCode)
			info, err := viaExec(t, ExecConfig{ExecConfig: plugin.config(config), Cluster: c}, stdin)

			switch {
			case tt.differs != "":
				if cg.err != nil || cg.token != tt.clientGoToken {
					t.Errorf("client-go: token %q, error %v; the case says it gives %q", cg.token, cg.err, tt.clientGoToken)
				}
			case tt.wantErr != "":
				if cg.err == nil || !strings.Contains(cg.err.Error(), tt.clientGoErr) {
					t.Errorf("client-go: error %v, the case says it contains %q", cg.err, tt.clientGoErr)
				}
			default:
				if cg.err != nil || cg.token != tt.wantToken || (cg.cert != nil) != tt.wantCert {
					t.Errorf("client-go: token %q, certificate %v, error %v; the case says token %q, certificate %v", cg.token, cg.cert != nil, cg.err, tt.wantToken, tt.wantCert)
				}
				if runs, want := cgPlugin.runs(), 1+2*btoi(!tt.wantExpiry.IsZero()); runs != want {
					t.Errorf("client-go ran the plugin %d times for 2 requests and a certificate, the case says %d", runs, want)
				}
			}

			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "handlers: exec plugin") {
					t.Fatalf("Exec: %v, %v; want an error containing %q", info, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if info.Token != tt.wantToken || (len(info.CertificateData) > 0) != tt.wantCert || !info.Expiration.Equal(tt.wantExpiry) {
				t.Errorf("Exec: %v expiring %v; want token %q, certificate %v, expiry %v", info, info.Expiration, tt.wantToken, tt.wantCert, tt.wantExpiry)
			}
			got, want := decodeInfo(t, plugin.info()), decodeInfo(t, cgPlugin.info())
			if !reflect.DeepEqual(got, want) {
				t.Errorf("KUBERNETES_EXEC_INFO:\n got %v\nwant %v (client-go's)", got, want)
			}
			spec, _ := got["spec"].(map[string]any)
			if spec["interactive"] != tt.wantInteractive || (spec["cluster"] != nil) != tt.wantCluster {
				t.Errorf("KUBERNETES_EXEC_INFO spec = %v, want interactive %v, cluster %v", spec, tt.wantInteractive, tt.wantCluster)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func decodeInfo(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("KUBERNETES_EXEC_INFO %q: %v", s, err)
	}
	return v
}
