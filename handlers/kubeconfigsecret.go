package handlers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers/internal/kubeconf"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// ClusterAPIKey is the key under which Cluster API keeps a workload
// cluster's kubeconfig, in the Secret <cluster>-kubeconfig.
const ClusterAPIKey = "value"

// KubeconfigSecretConfig names a kubeconfig kept in a Secret of a hub
// cluster.
type KubeconfigSecretConfig struct {
	// Client reads the Secret: typically kubernetes.NewForConfig(hub).CoreV1()
	// for the hub's config from its own vault. It needs get on the Secret.
	Client corev1client.SecretsGetter
	// Namespace and Name are the Secret's.
	Namespace, Name string
	// Key is the data key that holds the kubeconfig. Default: ClusterAPIKey.
	Key string
	// Context is the kubeconfig's context to use. Default: its
	// current-context.
	Context string
	// PluginPolicy says which exec plugins the kubeconfig may run, and
	// whether it may use an auth provider (only under AllowAll). Default,
	// unlike a kubeconfig file's: DenyAll, since whoever writes the Secret
	// would choose the commands this process runs. Set an Allowlist of the
	// plugins your clusters use (aws-iam-authenticator), or AllowAll. An
	// allowed plugin still runs with the arguments the Secret gives it
	// (which, for aws, gcloud or kubelogin, can read this process's files),
	// and with its env, less what would steer the plugin into other code
	// or send this process's secrets elsewhere (see the package doc, "Which
	// plugins may run"; a Secret whose env sets such a variable, which
	// worked before that check, now fails to log in, naming it). One that
	// mints a token from this process's own identity (aws-iam-authenticator
	// from its AWS role) mints it for the cluster the Secret names and
	// sends it to the Secret's server, so allow such a plugin only for
	// Secrets whose writers could use that identity anyway.
	PluginPolicy PluginPolicy
	// ClusterOnly, when set, reads the kubeconfig for its context's
	// cluster alone (server, CA, TLS server name: none of its users,
	// plugins or tokens, and PluginPolicy is not used) and logs in with
	// what ClusterOnly returns for that cluster: a credential from
	// elsewhere, such as tokens the hub mints (fleet's
	// SecretsOptions.Federated). The cluster must be https, with its CA
	// inline, verified, and reached with no proxy-url. Default: nil, the
	// kubeconfig's own credential.
	ClusterOnly func(ctx context.Context, cluster login.ConnectionInfo) (*login.ConnectionInfo, error)
}

// KubeconfigSecret returns a handler that logs in with the kubeconfig kept
// under key in the Secret namespace/name, read through client at every
// login (see KubeconfigSecretFrom): Cluster API's <cluster>-kubeconfig has
// it under "value" (ClusterAPIKey).
func KubeconfigSecret(client corev1client.SecretsGetter, namespace, name, key string) login.Handler {
	return KubeconfigSecretFrom(KubeconfigSecretConfig{Client: client, Namespace: namespace, Name: name, Key: key})
}

// KubeconfigSecretFrom returns a handler that reads a kubeconfig from a
// Secret at every login, so a rotated kubeconfig is picked up at the next
// login (a token that is a JWT expires at its exp claim, so the Secret is
// read again before then), and maps its context as piggyback.KubeconfigFrom maps a file's,
// with clientcmd's semantics, and two differences a Secret calls for: its
// exec plugins and auth providers are refused unless cfg.PluginPolicy allows
// them, and an entry that names a file (certificate-authority, client-key,
// tokenFile…) is refused: it would be a file of this machine, the pod's own
// ServiceAccount token, say, which the kubeconfig's author could have sent
// to a server of their choosing. Data must be inline.
//
// A missing Secret or key, or a kubeconfig that does not parse, is a
// permanent error naming the Secret and the key; the kubeconfig's content
// never appears in an error or a log.
//
// The handler is named "kubeconfig Secret <namespace>/<name>" (with the key
// and the context when they are not the defaults); its metric label is
// "kubeconfig Secret".
func KubeconfigSecretFrom(cfg KubeconfigSecretConfig) login.Handler {
	if cfg.Key == "" {
		cfg.Key = ClusterAPIKey
	}
	if policyUnset(cfg.PluginPolicy) {
		cfg.PluginPolicy = DenyAll
	}
	where := fmt.Sprintf("Secret %s/%s key %q", cfg.Namespace, cfg.Name, cfg.Key)
	name := "kubeconfig Secret " + cfg.Namespace + "/" + cfg.Name
	if cfg.Key != ClusterAPIKey {
		name += fmt.Sprintf(" key %q", cfg.Key)
	}
	if cfg.Context != "" {
		name += fmt.Sprintf(" context %q", cfg.Context)
	}
	return login.Named(name, "kubeconfig Secret", func(ctx context.Context) (*login.ConnectionInfo, error) {
		info, err := kubeconfigSecret(ctx, cfg, where)
		if err != nil {
			return nil, redact.Error(fmt.Errorf("handlers: %w", err))
		}
		return info, nil
	})
}

func kubeconfigSecret(ctx context.Context, cfg KubeconfigSecretConfig, where string) (*login.ConnectionInfo, error) {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.Name == "" {
		return nil, login.Permanent(errors.New("KubeconfigSecret needs a Client, a Namespace and a Name"))
	}
	secret, err := cfg.Client.Secrets(cfg.Namespace).Get(ctx, cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, login.Permanent(fmt.Errorf("%s: the Secret does not exist", where))
	case err != nil:
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	data, ok := secret.Data[cfg.Key]
	if !ok {
		return nil, login.Permanent(fmt.Errorf("%s: the Secret has no such key (its keys: %s)", where, strings.Join(slices.Sorted(maps.Keys(secret.Data)), ", ")))
	}
	raw, err := kubeconf.Load(data)
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("%s: %w", where, err))
	}
	if cfg.ClusterOnly != nil {
		cluster, err := clusterOf(raw, cfg.Context)
		if err != nil {
			return nil, login.Permanent(fmt.Errorf("%s: %w", where, err))
		}
		return cfg.ClusterOnly(ctx, cluster)
	}
	return kubeconf.Connection(ctx, kubeconf.Source{
		Config:  raw,
		Where:   where,
		Context: cfg.Context,
		Policy:  cfg.PluginPolicy,
		Inline:  true,
	}, kubeconfigPlugins)
}

// kubeconfigPlugins run a kubeconfig's exec plugin and token file.
var kubeconfigPlugins = kubeconf.Plugins{
	Exec: func(ctx context.Context, exec clientcmdapi.ExecConfig, cluster login.ConnectionInfo, disableCompression bool) (*login.ConnectionInfo, error) {
		return Exec(ExecConfig{ExecConfig: exec, Cluster: cluster, DisableCompression: disableCompression})(ctx)
	},
	TokenFile: func(ctx context.Context, path string, cluster login.ConnectionInfo) (*login.ConnectionInfo, error) {
		return TokenFile(path, cluster)(ctx)
	},
	Native: func(exec clientcmdapi.ExecConfig) bool {
		_, ok := ServedNatively(exec)
		return ok
	},
	Allowed: func(exec clientcmdapi.ExecConfig) error {
		if err := policyAllows(exec.PluginPolicy, exec.Command); err != nil {
			return err
		}
		if err := kubeconf.PluginEnvAllowed(exec.PluginPolicy, exec.Env); err != nil {
			return login.Permanent(fmt.Errorf("handlers: exec plugin %q: %w", exec.Command, err))
		}
		return nil
	},
}

// clusterOf is the cluster of raw's context (its current-context when
// context is ""), with no credential: an https server, its inline CA, and
// no proxy or skipped verification, which would let the kubeconfig's
// writer see what is sent there.
func clusterOf(raw *clientcmdapi.Config, contextName string) (login.ConnectionInfo, error) {
	if contextName == "" {
		contextName = raw.CurrentContext
	}
	c, ok := raw.Contexts[contextName]
	if !ok {
		return login.ConnectionInfo{}, fmt.Errorf("the kubeconfig has no context %q", contextName)
	}
	cluster, ok := raw.Clusters[c.Cluster]
	if !ok {
		return login.ConnectionInfo{}, fmt.Errorf("the kubeconfig's context %q names no cluster it has", contextName)
	}
	u, err := url.Parse(cluster.Server)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil:
		return login.ConnectionInfo{}, fmt.Errorf("the server of cluster %q is not an https URL with a host and no user info", c.Cluster)
	case cluster.CertificateAuthority != "":
		return login.ConnectionInfo{}, fmt.Errorf("cluster %q names a CA file of this machine: its CA must be inline", c.Cluster)
	case cluster.InsecureSkipTLSVerify:
		return login.ConnectionInfo{}, fmt.Errorf("cluster %q skips TLS verification: a credential goes only over verified TLS", c.Cluster)
	case cluster.ProxyURL != "":
		return login.ConnectionInfo{}, fmt.Errorf("cluster %q has a proxy-url: a credential goes to its server alone", c.Cluster)
	}
	return login.ConnectionInfo{Server: cluster.Server, CAData: cluster.CertificateAuthorityData, TLSServerName: cluster.TLSServerName}, nil
}
