package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers/internal/kubeconf"
	"github.com/authvault/authvault/login"
)

// Native is a login that serves a cloud's exec plugin in process: the
// modules under cloud/ (EKS, GKE, AKS) each give one, so that this module
// imports no cloud SDK. Once UseNative has it, every kubeconfig this
// process reads (piggyback's files and client-go loader, KubeconfigSecret,
// a fleet's Secrets, Argo CD's awsAuthConfig) and every Exec handler whose
// plugin it serves logs in with it instead of running the plugin.
//
// It is exported for the authors of such modules: a user passes the
// value a cloud module's Native function returns to UseNative and never
// builds one.
type Native struct {
	// Name names it in errors and in AllowNative: "eks", "gke", "aks".
	Name string
	// Serves tells whether it serves exec: its command (a path's last
	// element: "aws", "aws-iam-authenticator", "kubelogin"…) and the
	// arguments that choose the plugin's mode ("eks get-token").
	Serves func(exec clientcmdapi.ExecConfig) bool
	// Handler returns the handler for req, or an error when req's
	// arguments or environment hold something it does not understand:
	// a parameter is never ignored.
	Handler func(req NativeRequest) (login.Handler, error)
}

// NativeRequest is what a Native login is asked to serve: the argument of
// its Handler, exported for the authors of cloud modules as Native is.
type NativeRequest struct {
	// Exec is the plugin it replaces: command, arguments, environment.
	Exec clientcmdapi.ExecConfig
	// Cluster is the kubeconfig's cluster: server, CA, TLS settings.
	// The handler's credentials go with it.
	Cluster login.ConnectionInfo
	// Untrusted tells that someone else wrote the kubeconfig (a Secret:
	// its plugin policy is not AllowAll; a Secret read under AllowAll is
	// trusted as a file is): a token minted from this
	// process's cloud identity for the cluster it names is a credential
	// for that cluster, and its server is the writer's choice. Where the
	// cloud can say what the cluster's endpoint is, the handler must
	// check that Cluster.Server is it before it sends a token.
	Untrusted bool
}

// nativeLogins are those UseNative was given, in order.
var nativeLogins struct {
	sync.RWMutex
	list []Native
}

// UseNative makes the logins given serve the exec plugins they recognize,
// from now on, in this process: the opt-in of the cloud modules, as in
//
//	handlers.UseNative(eks.Native(), gke.Native())
//
// A kubeconfig someone else wrote (a Secret, whose plugin policy is DenyAll
// or an Allowlist) may use a native login only when its policy allows it
// by name (AllowNative); then it may not set tls-server-name nor proxy-url
// (the login sends the token to the cloud's endpoint, verified with the
// cloud's CA: set HTTPS_PROXY in this process's environment for a proxy),
// and its environment is checked as a plugin's is. A later login of the
// same name replaces an earlier one.
func UseNative(logins ...Native) {
	nativeLogins.Lock()
	defer nativeLogins.Unlock()
	for _, n := range logins {
		nativeLogins.list = slices.DeleteFunc(nativeLogins.list, func(o Native) bool { return o.Name == n.Name })
		nativeLogins.list = append(nativeLogins.list, n)
	}
}

// nativeFor is the native login that serves exec, if any.
func nativeFor(exec clientcmdapi.ExecConfig) (Native, bool) {
	nativeLogins.RLock()
	defer nativeLogins.RUnlock()
	for _, n := range nativeLogins.list {
		if n.Serves != nil && n.Serves(exec) {
			return n, true
		}
	}
	return Native{}, false
}

// ServedNatively tells whether a native login (UseNative) serves exec's
// plugin, and which: Exec runs no process for it, so an image that only
// meets such kubeconfigs needs no plugin binary. It is exported mostly for
// use by related packages (the fleet's ClusterProfiles, the kubeconfig
// handlers), and for a program that checks at start that it can serve a
// kubeconfig's plugin.
func ServedNatively(exec clientcmdapi.ExecConfig) (name string, ok bool) {
	n, ok := nativeFor(exec)
	return n.Name, ok
}

// nativePrefix marks a native login's name in a plugin policy's allowlist.
const nativePrefix = "native:"

// AllowNative returns policy that also lets the kubeconfigs it governs use
// the native logins named (UseNative), which a Secret's kubeconfig may not
// by default: DenyAll becomes an allowlist of those logins alone; an
// allowlist gains them. AllowAll allows every native login already.
func AllowNative(policy PluginPolicy, names ...string) PluginPolicy {
	switch policy.PolicyType {
	case "", clientcmdapi.PluginPolicyAllowAll:
		return policy
	case clientcmdapi.PluginPolicyDenyAll:
		policy = Allowlist()
	}
	policy.Allowlist = slices.Clone(policy.Allowlist)
	for _, n := range names {
		policy.Allowlist = append(policy.Allowlist, allowlistEntry(nativePrefix+n))
	}
	return policy
}

// trusted tells whether policy is a kubeconfig file's own: AllowAll.
func trusted(policy PluginPolicy) bool {
	return policy.PolicyType == "" || policy.PolicyType == clientcmdapi.PluginPolicyAllowAll
}

// nativeAllowed returns nil when policy lets exec's plugin be served by
// the native login n, and a permanent error naming both when not.
func nativeAllowed(policy PluginPolicy, n Native, command string) error {
	if !trusted(policy) && policy.PolicyType == clientcmdapi.PluginPolicyAllowlist {
		if err := allowlistReadable(command); err != nil {
			return err
		}
	}
	if trusted(policy) || slices.ContainsFunc(policy.Allowlist, func(e clientcmdapi.AllowlistEntry) bool {
		return entryCommand(e) == nativePrefix+n.Name
	}) {
		return nil
	}
	return login.Permanent(fmt.Errorf("handlers: exec plugin %q would log in with the native %s login, which plugin policy %s does not allow (handlers.AllowNative)",
		command, n.Name, policy.PolicyType))
}

// runNative logs in with n in place of cfg's plugin.
func runNative(ctx context.Context, cfg ExecConfig, n Native) (*login.ConnectionInfo, error) {
	if err := nativeAllowed(cfg.PluginPolicy, n, cfg.Command); err != nil {
		return nil, err
	}
	if cfg.APIVersion != execV1 && cfg.APIVersion != execV1beta1 {
		// As the plugin would be refused: a kubeconfig that works while
		// the native login serves it works when it does not.
		return nil, login.Permanent(fmt.Errorf("handlers: exec plugin %q: apiVersion %q is not supported (want %s or %s)", cfg.Command, cfg.APIVersion, execV1, execV1beta1))
	}
	untrusted := !trusted(cfg.PluginPolicy)
	if untrusted {
		if err := fromElsewhere(cfg); err != nil {
			return nil, login.Permanent(fmt.Errorf("handlers: exec plugin %q, served by the native %s login: %w", cfg.Command, n.Name, err))
		}
	}
	h, err := n.Handler(NativeRequest{Exec: cfg.ExecConfig, Cluster: clusterPart(cfg.Cluster), Untrusted: untrusted})
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("handlers: exec plugin %q, served by the native %s login: %w", cfg.Command, n.Name, err))
	}
	info, err := h(ctx)
	if err != nil {
		return nil, fmt.Errorf("handlers: exec plugin %q, served by the native %s login: %w", cfg.Command, n.Name, err)
	}
	if info == nil {
		return nil, nil
	}
	// The kubeconfig says where the credential goes, unless the login
	// says so itself: the cloud's endpoint and CA for a kubeconfig from
	// elsewhere, which then verifies TLS whatever the kubeconfig said.
	out := clusterPart(cfg.Cluster)
	if info.Server != "" {
		out.Server = info.Server
	}
	if len(info.CAData) > 0 || info.CAPath != "" {
		out.CAData, out.CAPath, out.Insecure = info.CAData, info.CAPath, false
	}
	out.Token, out.CertificateData, out.PrivateKeyData, out.Expiration = info.Token, info.CertificateData, info.PrivateKeyData, info.Expiration
	return &out, nil
}

// fromElsewhere refuses what a kubeconfig someone else wrote may not set
// when a native login serves it. The login sends the token to the cloud's
// endpoint and verifies it with the cloud's CA; a tls-server-name of the
// kubeconfig's would have that CA vouch for another name (a kubelet's
// serving certificate is signed by an EKS cluster's CA), and a proxy-url
// of its choosing can connect the token to a server of its choosing. The
// environment is checked as a plugin's is, whatever the native reads of it.
func fromElsewhere(cfg ExecConfig) error {
	switch {
	case cfg.Cluster.TLSServerName != "":
		return errors.New("a kubeconfig from elsewhere may not set tls-server-name: the login verifies the cloud's endpoint by its own name")
	case cfg.Cluster.ProxyURL != "":
		return errors.New("a kubeconfig from elsewhere may not set proxy-url: a proxy it chose could take the token elsewhere; " +
			"set HTTPS_PROXY in this process's environment to reach the cloud through a proxy")
	}
	return kubeconf.PluginEnvAllowed(cfg.PluginPolicy, cfg.Env)
}
