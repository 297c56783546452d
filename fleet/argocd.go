package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// SecretFormat says how a Secret describes its cluster.
type SecretFormat int

const (
	// ClusterAPI Secrets hold a kubeconfig under a key (SecretsOptions.Key)
	// and name their cluster with ClusterNameLabel.
	ClusterAPI SecretFormat = iota
	// ArgoCD Secrets are Argo CD's declarative cluster Secrets, labelled
	// ArgoCDSecretTypeLabel=cluster, with the keys name, server and config
	// (JSON: bearerToken, username and password, tlsClientConfig,
	// execProviderConfig, awsAuthConfig, proxyUrl, disableCompression).
	// An awsAuthConfig runs argocd-k8s-auth, as Argo CD does: an exec
	// plugin like any other, which PluginPolicy must allow. As in Argo CD,
	// awsAuthConfig comes before execProviderConfig, and a config with
	// either sends no bearerToken, username or password. Unlike Argo CD,
	// the in-cluster server (https://kubernetes.default.svc) gets no
	// credential of this process's own (its service account): a Secret
	// for it needs a config that authenticates, or add the hub with
	// Fleet.Add.
	ArgoCD
)

// ArgoCDSecretTypeLabel is the label of Argo CD's cluster Secrets (value
// "cluster"): the watch's default selector for ArgoCD, exported for a
// LabelSelector of your own that narrows it
// (ArgoCDSecretTypeLabel+"=cluster,env=prod").
const ArgoCDSecretTypeLabel = "argocd.argoproj.io/secret-type"

// argoCDNamespace is the namespace Argo CD is installed in by default, and
// reads its cluster Secrets from: WatchSecrets' default for ArgoCD.
const argoCDNamespace = "argocd"

// argoCDConfig is the config key of an Argo CD cluster Secret: the fields
// that authenticate and reach the cluster. Fields it does not know are
// ignored, as Argo CD adds some over time.
type argoCDConfig struct {
	Username        string `json:"username"`
	Password        string `json:"password"`
	BearerToken     string `json:"bearerToken"`
	TLSClientConfig struct {
		Insecure   bool   `json:"insecure"`
		ServerName string `json:"serverName"`
		CAData     []byte `json:"caData"`
		CertData   []byte `json:"certData"`
		KeyData    []byte `json:"keyData"`
	} `json:"tlsClientConfig"`
	AWSAuthConfig *struct {
		ClusterName string `json:"clusterName"`
		RoleARN     string `json:"roleARN"`
		Profile     string `json:"profile"`
	} `json:"awsAuthConfig"`
	ExecProviderConfig *struct {
		Command     string            `json:"command"`
		Args        []string          `json:"args"`
		Env         map[string]string `json:"env"`
		APIVersion  string            `json:"apiVersion"`
		InstallHint string            `json:"installHint"`
	} `json:"execProviderConfig"`
	ProxyURL           string `json:"proxyUrl"`
	DisableCompression bool   `json:"disableCompression"`
}

// argoCDFormat: Argo CD's cluster Secrets, the cluster named by their name
// key; a digest of server and config tells a change.
func argoCDFormat(policy handlers.PluginPolicy) secretFormat {
	return secretFormat{
		selector: ArgoCDSecretTypeLabel + "=cluster",
		slim: func(data map[string][]byte) map[string][]byte {
			kept := map[string][]byte{"name": data["name"]}
			if _, ok := data["server"]; ok {
				h := sha256.New()
				for _, key := range []string{"server", "config"} {
					h.Write(data[key])
					h.Write([]byte{0})
				}
				kept[digestKey] = h.Sum(nil)
			}
			return kept
		},
		clusterName: func(s *corev1.Secret) string { return string(s.Data["name"]) },
		// Any cluster Secret may give any name: two of one name are an
		// ambiguity, whichever came first.
		rank:    func(*corev1.Secret) claimRank { return namedClaim },
		refusal: func(*corev1.Secret) string { return "claims no cluster" }, // never: every one is ranked namedClaim
		holds:   "a server",
		changed: "its server or config changed",
		handler: func(client corev1client.SecretsGetter, namespace, name string) login.Handler {
			return argoCDSecret(client, namespace, name, policy)
		},
	}
}

// argoCDSecret returns a handler that reads an Argo CD cluster Secret at
// every login and maps it as a kubeconfig of one context from elsewhere
// (handlers.Kubeconfig), built as Argo CD builds its client-go config (a
// plugin's config has no token nor basic auth), with client-go's
// precedence (a client certificate wins over a plugin) and the policy over
// its plugin.
func argoCDSecret(client corev1client.SecretsGetter, namespace, name string, policy handlers.PluginPolicy) login.Handler {
	where := fmt.Sprintf("Argo CD cluster Secret %s/%s", namespace, name)
	return login.Named(where, "Argo CD Secret", func(ctx context.Context) (*login.ConnectionInfo, error) {
		secret, err := client.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, login.Permanent(fmt.Errorf("fleet: %s: the Secret does not exist", where))
		case err != nil:
			return nil, fmt.Errorf("fleet: %s: %w", where, err)
		}
		kubeconfig, err := argoCDKubeconfig(secret.Data)
		if err != nil {
			return nil, login.Permanent(redact.Error(fmt.Errorf("fleet: %s: %w", where, err)))
		}
		info, err := handlers.Kubeconfig(handlers.KubeconfigConfig{Config: kubeconfig, Name: where, PluginPolicy: policy})(ctx)
		if err != nil {
			return nil, redact.Error(fmt.Errorf("fleet: %w", err))
		}
		return info, nil
	})
}

func argoCDKubeconfig(data map[string][]byte) (*clientcmdapi.Config, error) {
	server := string(data["server"])
	if server == "" {
		return nil, errors.New("it has no server")
	}
	var c argoCDConfig
	if raw := data["config"]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &c); err != nil {
			// encoding/json quotes at most one character of its input.
			return nil, fmt.Errorf("config is not Argo CD's cluster config JSON: %w", err)
		}
	}
	if strings.HasPrefix(strings.ToLower(server), "http://") {
		// clientcmd, which maps the Secret, sends no credential over plain
		// http: the login would be anonymous.
		return nil, fmt.Errorf("server %q is plain http: a credential goes to an Argo CD cluster only over https", redact.URL(server))
	}
	cluster := &clientcmdapi.Cluster{
		Server: server, ProxyURL: c.ProxyURL, DisableCompression: c.DisableCompression,
		InsecureSkipTLSVerify: c.TLSClientConfig.Insecure, TLSServerName: c.TLSClientConfig.ServerName,
		CertificateAuthorityData: c.TLSClientConfig.CAData,
	}
	user := &clientcmdapi.AuthInfo{}
	certAndKey := len(c.TLSClientConfig.CertData) > 0 && len(c.TLSClientConfig.KeyData) > 0
	if certAndKey {
		// client-go uses a certificate only with its key, and ignores one
		// alone (which clientcmd would refuse).
		user.ClientCertificateData, user.ClientKeyData = c.TLSClientConfig.CertData, c.TLSClientConfig.KeyData
	}
	exec := &clientcmdapi.ExecConfig{InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	// Argo CD's order (RawRestConfig): awsAuthConfig, else
	// execProviderConfig, else the token and basic auth, which a plugin's
	// config leaves out (a stale bearerToken beside a plugin is not sent).
	switch {
	case (c.AWSAuthConfig != nil || c.ExecProviderConfig != nil) && certAndKey:
		// client-go runs no plugin beside a client certificate and its
		// key, and a plugin's config has no token nor basic auth: the
		// certificate alone.
	case c.AWSAuthConfig != nil:
		// What Argo CD runs for an EKS cluster: its own helper binary.
		a := c.AWSAuthConfig
		exec.Command, exec.APIVersion = "argocd-k8s-auth", "client.authentication.k8s.io/v1beta1"
		exec.Args = []string{"aws", "--cluster-name", a.ClusterName}
		if a.RoleARN != "" {
			exec.Args = append(exec.Args, "--role-arn", a.RoleARN)
		}
		if a.Profile != "" {
			exec.Args = append(exec.Args, "--profile", a.Profile)
		}
		user.Exec = exec
	case c.ExecProviderConfig != nil:
		p := c.ExecProviderConfig
		exec.Command, exec.Args, exec.APIVersion, exec.InstallHint = p.Command, p.Args, p.APIVersion, p.InstallHint
		for _, k := range slices.Sorted(maps.Keys(p.Env)) {
			exec.Env = append(exec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: p.Env[k]})
		}
		user.Exec = exec
	case c.BearerToken != "":
		// client-go refuses a token beside basic auth; the token is what
		// a client-go config of Argo CD's would have sent.
		user.Token = c.BearerToken
	default:
		user.Username, user.Password = c.Username, c.Password
	}
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["argocd"] = cluster
	kubeconfig.AuthInfos["argocd"] = user
	kubeconfig.Contexts["argocd"] = &clientcmdapi.Context{Cluster: "argocd", AuthInfo: "argocd"}
	kubeconfig.CurrentContext = "argocd"
	return kubeconfig, nil
}
