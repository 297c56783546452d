package piggyback

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// parity is what a kubeconfig comes to, through the handler or through
// client-go: whether it fails, and on success the server, where the CA and
// the client certificate come from ("data", "file:<path>" or ""), the
// Authorization header sent, the TLS server name, the proxy and the
// namespace.
type parity struct {
	fails      bool
	server     string
	ca, cert   string
	auth       string
	insecure   bool
	serverName string
	proxy      string
	namespace  string
}

func (p parity) String() string {
	if p.fails {
		return "{fails}"
	}
	return fmt.Sprintf("{server %q, ca %q, cert %q, auth %q, insecure %v, server name %q, proxy %q, namespace %q}",
		p.server, p.ca, p.cert, p.auth, p.insecure, p.serverName, p.proxy, p.namespace)
}

// namesFile matches a kubeconfig entry that names a file.
var namesFile = regexp.MustCompile(`(?m)(certificate-authority|client-certificate|client-key|tokenFile): *[^\s]`)

func fromData(data []byte, file string) string {
	switch {
	case len(data) > 0:
		return "data"
	case file != "":
		return "file:" + file
	}
	return ""
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// handlerSays runs the kubeconfig handler. A broken kubeconfig is a
// permanent error.
func handlerSays(t *testing.T, h login.Handler) parity {
	t.Helper()
	info, err := h(context.Background())
	if err != nil {
		t.Logf("handler: %v", err)
		if perm := (*login.PermanentError)(nil); !errors.As(err, &perm) {
			t.Errorf("handler: %v is not a permanent error", err)
		}
		return parity{fails: true}
	}
	if info == nil {
		t.Log("handler: no kubeconfig")
		return parity{fails: true}
	}
	p := parity{
		server: info.Server, ca: fromData(info.CAData, info.CAPath), cert: fromData(info.CertificateData, info.CertificatePath),
		insecure: info.Insecure, serverName: info.TLSServerName, proxy: info.ProxyURL, namespace: info.DefaultNamespace,
	}
	switch {
	case info.Token != "":
		scheme := info.Scheme
		if scheme == "" {
			scheme = "Bearer"
		}
		p.auth = scheme + " " + info.Token
	case info.Username != "" || info.Password != "":
		p.auth = basic(info.Username, info.Password)
	}
	return p
}

// clientGoSays runs clientcmd's deferred loading client config, then
// client-go's TLS configuration (which loads and parses the CA and client
// certificate, as rest.TransportFor does, without starting its certificate
// reloader) and its HTTP wrappers (which run an exec plugin).
func clientGoSays(t *testing.T, rules *clientcmd.ClientConfigLoadingRules, contextName string) parity {
	t.Helper()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: contextName})
	cfg, err := cc.ClientConfig()
	if err != nil {
		t.Logf("clientcmd: %v", err)
		return parity{fails: true}
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		t.Logf("clientcmd namespace: %v", err)
		return parity{fails: true}
	}
	if _, err := rest.TLSConfigFor(cfg); err != nil {
		t.Logf("client-go TLS: %v", err)
		return parity{fails: true}
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		t.Logf("client-go server: %v", err)
		return parity{fails: true}
	}
	auth, err := clientGoAuthorization(t, cfg)
	if err != nil {
		t.Logf("client-go round trip: %v", err)
		return parity{fails: true}
	}
	p := parity{
		server: u.String(), ca: fromData(cfg.CAData, cfg.CAFile), cert: fromData(cfg.CertData, cfg.CertFile), auth: auth,
		insecure: cfg.Insecure, serverName: cfg.ServerName, namespace: ns,
	}
	if cfg.Proxy != nil {
		req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
		if proxy, err := cfg.Proxy(req); err == nil && proxy != nil {
			p.proxy = proxy.String()
		}
	}
	return p
}

// A kubeconfig of one cluster "c", one user "u" and one context "c" naming
// both, current; cluster and user are YAML flow-mapping bodies.
func oneContext(cluster, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster: {%s}
users:
- name: u
  user: {%s}
contexts:
- name: c
  context: {cluster: c, user: u}
`, cluster, user)
}

const server = `server: "https://api.example:6443"`

// twoContexts is a kubeconfig of two contexts, b current.
const twoContexts = `apiVersion: v1
kind: Config
current-context: b
clusters:
- {name: a, cluster: {server: "https://a.example"}}
- {name: b, cluster: {server: "https://b.example"}}
users:
- {name: a, user: {token: token-a}}
- {name: b, user: {token: token-b}}
contexts:
- {name: a, context: {cluster: a, user: a, namespace: ns-a}}
- {name: b, context: {cluster: b, user: b, namespace: ns-b}}
`

// TestClientcmdParity runs a corpus built from the facts clientcmd's own
// tests check (client_config_test.go, loader_test.go, validation_test.go,
// merged_client_builder_test.go) through the handler and through client-go,
// and compares what each makes of every kubeconfig. Cases where the project
// differs on purpose say why, and the test holds both outcomes.
//
// In a kubeconfig, {{DIR}} is the case's directory (holding certs/ca.crt,
// certs/client.crt, certs/client.key, certs/garbage.pem and tokens/robot),
// {{CA_DATA}}, {{CERT_DATA}} and {{KEY_DATA}} the base64 PEM, {{PLUGIN}}
// the test plugin.
func TestClientcmdParity(t *testing.T) {
	isolate(t)
	ca := testpki.NewCA(t)
	cert, key := ca.Issue(t, "operator", false)
	b64 := base64.StdEncoding.EncodeToString
	const robot = "robot-token-0123456789"
	plugin := func(extra string) string {
		return `exec: {apiVersion: client.authentication.k8s.io/v1, command: "{{PLUGIN}}", interactiveMode: Never` + extra +
			`, env: [{name: PLUGIN_MODE, value: env}, {name: PLUGIN_ENV_NAME, value: PARITY_TOKEN}, {name: PARITY_TOKEN, value: exec-token}]}`
	}
	ok := func(p parity) parity {
		if p.server == "" {
			p.server = "https://api.example:6443"
		}
		if p.namespace == "" {
			p.namespace = "default"
		}
		return p
	}
	fails := parity{fails: true}

	tests := []struct {
		name  string
		files map[string]string // relative to the case's directory
		// kubeconfig is $KUBECONFIG, relative paths joined with the list
		// separator; one path is also given as the explicit Path.
		kubeconfig []string
		context    string
		want       parity // client-go's outcome
		// differs says why the project differs on purpose; handler is then
		// the handler's outcome.
		differs string
		handler parity
	}{
		// Current context (client_config_test.go TestCreateClean,
		// TestCreateMissingContext; validation_test.go).
		{
			name:       "current-context selects the context",
			files:      map[string]string{"config": twoContexts},
			kubeconfig: []string{"config"},
			want:       parity{server: "https://b.example", auth: "Bearer token-b", namespace: "ns-b"},
		},
		{
			name:       "a named context overrides current-context",
			files:      map[string]string{"config": twoContexts},
			kubeconfig: []string{"config"},
			context:    "a",
			want:       parity{server: "https://a.example", auth: "Bearer token-a", namespace: "ns-a"},
		},
		{
			name:       "no current-context",
			files:      map[string]string{"config": strings.Replace(oneContext(server, "token: t"), "current-context: c\n", "", 1)},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "current-context names a missing context",
			files:      map[string]string{"config": strings.Replace(oneContext(server, "token: t"), "current-context: c", "current-context: gone", 1)},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "a named context that is missing",
			files:      map[string]string{"config": oneContext(server, "token: t")},
			kubeconfig: []string{"config"},
			context:    "gone",
			want:       fails,
		},
		{
			name:       "context names a missing cluster",
			files:      map[string]string{"config": strings.Replace(oneContext(server, "token: t"), "{cluster: c,", "{cluster: gone,", 1)},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "context names a missing user",
			files:      map[string]string{"config": strings.Replace(oneContext(server, "token: t"), "user: u}", "user: gone}", 1)},
			kubeconfig: []string{"config"},
			want:       ok(parity{}),
			differs: "clientcmd goes on without credentials (the server would see an anonymous user); the handler refuses " +
				"a context naming a missing user, a permanent error naming the entry (KubeconfigFrom's doc)",
			handler: fails,
		},

		// Server (validation_test.go TestValidateEmptyClusterInfo,
		// client_config_test.go TestCreateCleanWithPrefix).
		{
			name:       "cluster without a server",
			files:      map[string]string{"config": oneContext("insecure-skip-tls-verify: true", "token: t")},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "server without a scheme",
			files:      map[string]string{"config": oneContext(`server: "api.example:6443"`, "token: t")},
			kubeconfig: []string{"config"},
			want:       ok(parity{server: "http://api.example:6443"}),
			differs: "clientcmd takes a server without a scheme for plain http and drops the user's credentials; " +
				"the handler refuses it, a permanent error asking for https:// (or http:// to mean plain http)",
			handler: fails,
		},
		{
			// clientcmd reads the user only for a TLS transport.
			name:       "server with http://: no credentials",
			files:      map[string]string{"config": oneContext(`server: "http://api.example:8080"`, "token: t")},
			kubeconfig: []string{"config"},
			want:       ok(parity{server: "http://api.example:8080"}),
		},
		{
			name:       "server with a path prefix",
			files:      map[string]string{"config": oneContext(`server: "https://rancher.example/k8s/clusters/c-1"`, "token: t")},
			kubeconfig: []string{"config"},
			want:       ok(parity{server: "https://rancher.example/k8s/clusters/c-1", auth: "Bearer t"}),
		},

		// TLS (client_config_test.go TestInsecureOverridesCA,
		// TestCAOverridesCAData, TestTLSServerName, TestProxyURL;
		// validation_test.go TestValidateMissingCAFileClusterInfo,
		// TestValidateCleanWithCAClusterInfo).
		{
			name:       "insecure-skip-tls-verify alone",
			files:      map[string]string{"config": oneContext(server+", insecure-skip-tls-verify: true", "token: t")},
			kubeconfig: []string{"config"},
			want:       ok(parity{insecure: true, auth: "Bearer t"}),
		},
		{
			name:       "insecure-skip-tls-verify with a CA file",
			files:      map[string]string{"config": oneContext(server+", insecure-skip-tls-verify: true, certificate-authority: {{DIR}}/certs/ca.crt", "token: t")},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "insecure-skip-tls-verify with CA data",
			files:      map[string]string{"config": oneContext(server+", insecure-skip-tls-verify: true, certificate-authority-data: {{CA_DATA}}", "token: t")},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "certificate-authority file",
			files:      map[string]string{"config": oneContext(server+", certificate-authority: {{DIR}}/certs/ca.crt", "token: t")},
			kubeconfig: []string{"config"},
			want:       ok(parity{ca: "file:{{DIR}}/certs/ca.crt", auth: "Bearer t"}),
		},
		{
			name:       "certificate-authority data",
			files:      map[string]string{"config": oneContext(server+", certificate-authority-data: {{CA_DATA}}", "token: t")},
			kubeconfig: []string{"config"},
			want:       ok(parity{ca: "data", auth: "Bearer t"}),
		},
		{
			name:       "certificate-authority file that is missing",
			files:      map[string]string{"config": oneContext(server+", certificate-authority: {{DIR}}/certs/gone.crt", "token: t")},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "certificate-authority file holding no PEM",
			files:      map[string]string{"config": oneContext(server+", certificate-authority: {{DIR}}/certs/garbage.pem", "token: t")},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "tls-server-name",
			files:      map[string]string{"config": oneContext(server+", certificate-authority-data: {{CA_DATA}}, tls-server-name: kubernetes.default", "token: t")},
			kubeconfig: []string{"config"},
			want:       ok(parity{ca: "data", serverName: "kubernetes.default", auth: "Bearer t"}),
		},
		{
			name:       "proxy-url",
			files:      map[string]string{"config": oneContext(server+`, proxy-url: "http://proxy.example:3128"`, "token: t")},
			kubeconfig: []string{"config"},
			want:       ok(parity{proxy: "http://proxy.example:3128", auth: "Bearer t"}),
		},

		// Users (client_config_test.go TestCertificateData, TestBasicAuthData,
		// TestBasicTokenFile, TestPrecedenceTokenFile; validation_test.go
		// TestValidateCertFilesNotFoundAuthInfo, TestValidateCleanCertFilesAuthInfo,
		// TestValidateMultipleMethodsAuthInfo, TestValidateAuthInfoExec*).
		{
			name:       "client certificate and key files",
			files:      map[string]string{"config": oneContext(server, "client-certificate: {{DIR}}/certs/client.crt, client-key: {{DIR}}/certs/client.key")},
			kubeconfig: []string{"config"},
			want:       ok(parity{cert: "file:{{DIR}}/certs/client.crt"}),
		},
		{
			name:       "client certificate and key data",
			files:      map[string]string{"config": oneContext(server, "client-certificate-data: {{CERT_DATA}}, client-key-data: {{KEY_DATA}}")},
			kubeconfig: []string{"config"},
			want:       ok(parity{cert: "data"}),
		},
		{
			name:       "client certificate file that is missing",
			files:      map[string]string{"config": oneContext(server, "client-certificate: {{DIR}}/certs/gone.crt, client-key: {{DIR}}/certs/client.key")},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "client key file holding no PEM",
			files:      map[string]string{"config": oneContext(server, "client-certificate: {{DIR}}/certs/client.crt, client-key: {{DIR}}/certs/garbage.pem")},
			kubeconfig: []string{"config"},
			want:       ok(parity{cert: "file:{{DIR}}/certs/client.crt"}),
			differs: "client-go loads certificate files in the handshake and fails there, on every request; " +
				"the handler reads them at login and refuses a file holding no PEM, naming the entry and the field",
			handler: fails,
		},
		{
			name:       "token",
			files:      map[string]string{"config": oneContext(server, "token: kubeconfig-token")},
			kubeconfig: []string{"config"},
			want:       ok(parity{auth: "Bearer kubeconfig-token"}),
		},
		{
			name:       "tokenFile",
			files:      map[string]string{"config": oneContext(server, "tokenFile: {{DIR}}/tokens/robot")},
			kubeconfig: []string{"config"},
			want:       ok(parity{auth: "Bearer " + robot}),
		},
		{
			name:       "token and tokenFile: the file's token is sent",
			files:      map[string]string{"config": oneContext(server, "token: kubeconfig-token, tokenFile: {{DIR}}/tokens/robot")},
			kubeconfig: []string{"config"},
			want:       ok(parity{auth: "Bearer " + robot}),
		},
		{
			name:       "tokenFile that is missing",
			files:      map[string]string{"config": oneContext(server, "tokenFile: {{DIR}}/tokens/gone")},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "basic auth",
			files:      map[string]string{"config": oneContext(server, "username: admin, password: kubeconfig-password")},
			kubeconfig: []string{"config"},
			want:       ok(parity{auth: basic("admin", "kubeconfig-password")}),
		},
		{
			name:       "token and basic auth",
			files:      map[string]string{"config": oneContext(server, "token: t, username: admin, password: p")},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "exec",
			files:      map[string]string{"config": oneContext(server+", certificate-authority-data: {{CA_DATA}}", plugin(""))},
			kubeconfig: []string{"config"},
			want:       ok(parity{ca: "data", auth: "Bearer exec-token"}),
		},
		{
			name:       "exec without an apiVersion",
			files:      map[string]string{"config": oneContext(server, strings.Replace(plugin(""), "apiVersion: client.authentication.k8s.io/v1, ", "", 1))},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "exec with an auth-provider",
			files:      map[string]string{"config": oneContext(server, plugin("")+", auth-provider: {name: oidc}")},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "exec with an invalid interactiveMode",
			files:      map[string]string{"config": oneContext(server, strings.Replace(plugin(""), "interactiveMode: Never", "interactiveMode: Sometimes", 1))},
			kubeconfig: []string{"config"},
			want:       fails,
		},

		// Namespace (client_config_test.go TestNamespaceOverride).
		{
			name:       "namespace from the context",
			files:      map[string]string{"config": strings.Replace(oneContext(server, "token: t"), "{cluster: c, user: u}", "{cluster: c, user: u, namespace: team-a}", 1)},
			kubeconfig: []string{"config"},
			want:       ok(parity{auth: "Bearer t", namespace: "team-a"}),
		},

		// Relative paths (loader_test.go TestResolveRelativePaths): against the
		// directory of the file that names them.
		{
			name: "relative paths",
			files: map[string]string{"kube/config": oneContext(server+", certificate-authority: ../certs/ca.crt",
				"client-certificate: ../certs/client.crt, client-key: ../certs/client.key")},
			kubeconfig: []string{"kube/config"},
			want:       ok(parity{ca: "file:{{DIR}}/certs/ca.crt", cert: "file:{{DIR}}/certs/client.crt"}),
		},
		{
			name:       "relative tokenFile",
			files:      map[string]string{"kube/config": oneContext(server, "tokenFile: ../tokens/robot")},
			kubeconfig: []string{"kube/config"},
			want:       ok(parity{auth: "Bearer " + robot}),
		},

		// Merging (loader_test.go TestConflictingCurrentContext,
		// TestToleratingMissingFiles, TestNonExistentCommandLineFile,
		// TestErrorReadingNonFile, TestDuplicate*Name; relative paths in a
		// second file against that file's directory).
		{
			name: "KUBECONFIG list: the first definition wins",
			files: map[string]string{
				"first":  oneContext(`server: "https://first.example"`, "token: first-token"),
				"second": strings.Replace(oneContext(`server: "https://second.example"`, "token: second-token"), "current-context: c", "current-context: other", 1),
			},
			kubeconfig: []string{"first", "second"},
			want:       ok(parity{server: "https://first.example", auth: "Bearer first-token"}),
		},
		{
			name: "KUBECONFIG list: entries from several files",
			files: map[string]string{
				"contexts": `apiVersion: v1
kind: Config
current-context: split
contexts:
- {name: split, context: {cluster: far, user: far, namespace: merged}}
`,
				"sub/clusters": `apiVersion: v1
kind: Config
clusters:
- {name: far, cluster: {server: "https://far.example", certificate-authority: ../certs/ca.crt}}
users:
- {name: far, user: {tokenFile: ../tokens/robot}}
`,
			},
			kubeconfig: []string{"contexts", "sub/clusters"},
			want:       parity{server: "https://far.example", ca: "file:{{DIR}}/certs/ca.crt", auth: "Bearer " + robot, namespace: "merged"},
		},
		{
			name:       "KUBECONFIG list with a missing file",
			files:      map[string]string{"config": oneContext(server, "token: t")},
			kubeconfig: []string{"gone", "config"},
			want:       ok(parity{auth: "Bearer t"}),
		},
		{
			name:       "explicit path that is missing",
			kubeconfig: []string{"gone"},
			want:       fails,
		},
		{
			name:       "explicit path that is a directory",
			files:      map[string]string{"kube/config": oneContext(server, "token: t")},
			kubeconfig: []string{"kube"},
			want:       fails,
		},
		{
			name:       "two clusters of one name",
			files:      map[string]string{"config": strings.Replace(oneContext(server, "token: t"), "clusters:\n", "clusters:\n- {name: c, cluster: {server: \"https://dup.example\"}}\n", 1)},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "malformed YAML",
			files:      map[string]string{"config": "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://api.example\"}\n  - ]:\n"},
			kubeconfig: []string{"config"},
			want:       fails,
		},
		{
			name:       "empty file",
			files:      map[string]string{"config": ""},
			kubeconfig: []string{"config"},
			want:       fails,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			fill := strings.NewReplacer("{{DIR}}", dir, "{{CA_DATA}}", b64(ca.PEM), "{{CERT_DATA}}", b64(cert), "{{KEY_DATA}}", b64(key), "{{PLUGIN}}", pluginPath)
			files := map[string]string{
				"certs/ca.crt": string(ca.PEM), "certs/client.crt": string(cert), "certs/client.key": string(key),
				"certs/garbage.pem": "not a certificate\n", "tokens/robot": robot,
			}
			for name, content := range tt.files {
				files[name] = fill.Replace(content)
			}
			for name, content := range files {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, content)
			}
			want := tt.want
			want.ca, want.cert = fill.Replace(want.ca), fill.Replace(want.cert)
			handlerWant := want
			if tt.differs != "" {
				handlerWant = tt.handler
			}
			var paths []string
			for _, p := range tt.kubeconfig {
				paths = append(paths, filepath.Join(dir, p))
			}

			type run struct {
				how   string
				opts  KubeconfigOptions
				rules func() *clientcmd.ClientConfigLoadingRules
			}
			// A $KUBECONFIG naming only a missing file is no kubeconfig at
			// all (client-go tolerates missing files in the list): a missing
			// file is an error only as the explicit path.
			var runs []run
			if len(paths) > 1 || fileExists(paths[0]) {
				runs = append(runs, run{
					how:  "$KUBECONFIG",
					opts: KubeconfigOptions{Context: tt.context},
					rules: func() *clientcmd.ClientConfigLoadingRules {
						t.Setenv(clientcmd.RecommendedConfigPathEnvVar, strings.Join(paths, string(os.PathListSeparator)))
						return clientcmd.NewDefaultClientConfigLoadingRules()
					},
				})
			}
			if len(paths) == 1 {
				runs = append(runs, run{
					how:  "explicit path",
					opts: KubeconfigOptions{Path: paths[0], Context: tt.context},
					rules: func() *clientcmd.ClientConfigLoadingRules {
						return &clientcmd.ClientConfigLoadingRules{ExplicitPath: paths[0]}
					},
				})
			}
			if len(paths) == 1 && fileExists(paths[0]) {
				// The same kubeconfig from a Secret, under AllowAll, comes to
				// the same credential as the file, unless it names a file:
				// KubeconfigSecret refuses that (see its doc).
				t.Run("Secret", func(t *testing.T) {
					content, err := os.ReadFile(paths[0])
					if err != nil {
						t.Fatal(err)
					}
					want := handlerWant
					if namesFile.MatchString(string(content)) {
						want = fails
					}
					hub := fake.NewClientset(&corev1.Secret{
						ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "c-kubeconfig"},
						Data:       map[string][]byte{"value": content},
					})
					h := handlers.KubeconfigSecretFrom(handlers.KubeconfigSecretConfig{
						Client: hub.CoreV1(), Namespace: "fleet", Name: "c-kubeconfig", Context: tt.context, PluginPolicy: handlers.AllowAll,
					})
					if got := handlerSays(t, h); got != want {
						t.Errorf("KubeconfigSecret: %v, want %v", got, want)
					}
				})
			}
			for _, r := range runs {
				t.Run(r.how, func(t *testing.T) {
					rules := r.rules()
					if got := clientGoSays(t, rules, tt.context); got != want {
						t.Errorf("client-go: %v, the case says %v", got, want)
					}
					if got := handlerSays(t, KubeconfigFrom(r.opts)); got != handlerWant {
						if tt.differs != "" {
							t.Errorf("handler: %v, want %v (differs on purpose: %s)", got, handlerWant, tt.differs)
						} else {
							t.Errorf("handler: %v, client-go: %v", got, handlerWant)
						}
					}
				})
			}
		})
	}
}
