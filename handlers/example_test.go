package handlers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// An exec credential plugin, as a kubeconfig's exec section names it. The
// plugin here is a shell that prints its ExecCredential, a token that
// expires in 2100; a real one (for EKS: Command "aws", Args "eks",
// "get-token", "--cluster-name", "prod") gives tokens of minutes, and the
// vault runs it again in the background before they expire.
func ExampleExec() {
	plugin := handlers.Exec(handlers.ExecConfig{
		ExecConfig: clientcmdapi.ExecConfig{
			Command: "sh",
			Args: []string{"-c", `echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",` +
				`"status":{"token":"from-the-plugin","expirationTimestamp":"2100-01-01T00:00:00Z"}}'`},
			APIVersion:      "client.authentication.k8s.io/v1",
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		},
		Cluster: login.ConnectionInfo{Server: "https://prod.example:6443"},
	})
	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(plugin, login.ID("plugin"), login.Timeout(time.Minute))
	cred, err := v.Select(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cred.Handler, cred.Info.Server, cred.Info.Expiration.Year())
	// Output: plugin https://prod.example:6443 2100
}

// A projected ServiceAccount token, reread at least once a minute.
func ExampleTokenFile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "token")
	_ = os.WriteFile(path, []byte("projected-token\n"), 0o600)

	h := handlers.TokenFile(path, login.ConnectionInfo{Server: "https://kubernetes.default.svc"})
	info, err := h(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Server, info.RefreshAfter)
	// Output: https://kubernetes.default.svc 1m0s
}

// A fixed credential, for tests or a token given on the command line.
func ExampleStatic() {
	h := handlers.Static(login.ConnectionInfo{Server: "https://api.example:6443", Token: "from-a-flag"})
	info, _ := h(context.Background())
	fmt.Println(info.Server, strings.Contains(fmt.Sprint(info), "from-a-flag")) // printing redacts
	// Output: https://api.example:6443 false
}

// Each ready-made handler registered with a vault, as docs/vault.md's
// "Login handlers" shows them (the guide quotes the lines from OnLogin on). It
// is compiled, not run: the plugin, the files and the API server are the
// reader's.
func Example_loginHandlers() {
	v := vault.New(vault.Options{})
	defer v.Close()
	server, caPath := "https://prod.example:6443", "/etc/prod/ca.crt"
	cluster := login.ConnectionInfo{Server: server, CAPath: caPath}
	kubeconfigUser := &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		Command: "aws", Args: []string{"eks", "get-token", "--cluster-name", "prod"},
		APIVersion: "client.authentication.k8s.io/v1beta1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	tokenFlag := new(string) // flag.String("token", ...) in a program
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: server, Transport: v.Transport()})
	if err != nil {
		return
	}

	// A credential plugin, as in a kubeconfig's exec section (aws, gke-gcloud-auth-plugin, kubelogin...).
	v.OnLogin(handlers.Exec(handlers.ExecConfig{ExecConfig: *kubeconfigUser.Exec, Cluster: cluster}), login.Timeout(time.Minute))

	// A fixed credential: a token from a flag, a test.
	v.OnLogin(handlers.Static(login.ConnectionInfo{Server: server, CAPath: caPath, Token: *tokenFlag}))

	// A bearer token file (a regular file of at most 1 MiB, one token), read again every minute
	// (RefreshAfter) and before a JWT's exp; a token that has not changed is kept.
	v.OnLogin(handlers.TokenFile("/var/run/secrets/tokens/operator", login.ConnectionInfo{Server: server, CAPath: caPath}))

	// Short-lived tokens for a tenant's ServiceAccount through the TokenRequest API.
	v.OnLogin(handlers.TokenRequest(handlers.TokenRequestConfig{Client: cs.CoreV1(), Namespace: "tenant-a", Name: "deployer",
		ExpirationSeconds: 900, Cluster: cluster}))
}

// A kubeconfig the operator holds already, here parsed from bytes kept in
// a secret manager: without LoadingRules it is taken for someone else's,
// so an exec plugin would need a PluginPolicy that allows it, and an entry
// naming a file of this machine is refused.
func ExampleKubeconfig() {
	kubeconfig, err := clientcmd.Load([]byte(`
apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://prod.example:6443", insecure-skip-tls-verify: true}
users:
- name: robot
  user: {token: robot-token}
contexts:
- name: prod
  context: {cluster: prod, user: robot, namespace: team-a}
current-context: prod
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	h := handlers.Kubeconfig(handlers.KubeconfigConfig{Config: kubeconfig, Name: "kubeconfig of tenant a"})
	info, err := h(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Server, info.DefaultNamespace, info.Token != "")

	// The handler has kubeconfig now: another kubeconfig, another handler.
	withFile := kubeconfig.DeepCopy()
	withFile.AuthInfos["robot"] = &clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"}
	_, err = handlers.Kubeconfig(handlers.KubeconfigConfig{Config: withFile, Name: "kubeconfig of tenant a"})(context.Background())
	fmt.Println(err)
	// Output:
	// https://prod.example:6443 team-a true
	// handlers: kubeconfig of tenant a: user "robot": tokenFile names a file of this machine (/var/run/secrets/kubernetes.io/serviceaccount/token); a kubeconfig from elsewhere (a Secret, a ClusterProfile, one given without its loading rules) must carry it inline (token)
}

// A kubeconfig's cluster (its server and CA) with the token from
// somewhere else, here a file beside it: a handler of one's own that
// composes TokenFile with the cluster, both read again at every login (a
// rotated CA, a new token). docs/vault.md quotes it; compiled, not run.
func Example_kubeconfigClusterWithATokenElsewhere() {
	v := vault.New(vault.Options{})
	defer v.Close()
	kubeconfigPath, tokenPath := "/etc/prod/kubeconfig", "/etc/prod/token"

	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		kc, err := clientcmd.LoadFromFile(kubeconfigPath)
		if err != nil {
			return nil, err
		}
		if err := clientcmd.ResolveLocalPaths(kc); err != nil { // a relative certificate-authority
			return nil, err
		}
		current := kc.Contexts[kc.CurrentContext]
		if current == nil || kc.Clusters[current.Cluster] == nil {
			return nil, login.Permanent(fmt.Errorf("%s: no cluster for its current context %q", kubeconfigPath, kc.CurrentContext))
		}
		c := kc.Clusters[current.Cluster]
		return handlers.TokenFile(tokenPath, login.ConnectionInfo{Server: c.Server, CAPath: c.CertificateAuthority,
			CAData: c.CertificateAuthorityData, TLSServerName: c.TLSServerName, Insecure: c.InsecureSkipTLSVerify})(ctx)
	}, login.ID("kubeconfig cluster, token file"))
}
