// Package kubeconf turns a kubeconfig, or a client-go rest.Config, into a
// credential: the one mapping behind handlers.Kubeconfig (a loaded kubeconfig,
// and through it piggyback's files and fleet's ClusterProfiles), handlers.RESTConfig
// and handlers.KubeconfigSecret (a Secret), with clientcmd's semantics. It
// lives under handlers because it runs handlers' Exec and TokenFile.
//
// It returns errors without a package prefix; its callers add theirs. Errors
// name the source and the entry, never a token, password, key or the
// kubeconfig's content.
package kubeconf

import (
	"context"
	"fmt"

	clientexec "k8s.io/client-go/plugin/pkg/client/auth/exec"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/internal/whence"
	"github.com/authvault/authvault/login"
)

// Plugins run what a kubeconfig's user may need beyond fields: an exec
// plugin and a token file. They are handlers.Exec and handlers.TokenFile,
// passed in because the handlers package itself builds on this one.
type Plugins struct {
	Exec      func(ctx context.Context, exec clientcmdapi.ExecConfig, cluster login.ConnectionInfo, disableCompression bool) (*login.ConnectionInfo, error)
	TokenFile func(ctx context.Context, path string, cluster login.ConnectionInfo) (*login.ConnectionInfo, error)
	// Native tells whether Exec serves exec in process, without running
	// it (handlers.ServedNatively): then client-go must not run it either.
	Native func(exec clientcmdapi.ExecConfig) bool
	// Allowed refuses a plugin its policy does not allow, as Exec would:
	// asked before client-go's own transport is kept for a config that
	// runs the plugin itself (impersonation), so that a refused plugin
	// fails the login rather than every request.
	Allowed func(exec clientcmdapi.ExecConfig) error
}

// Source is a loaded kubeconfig and what to take from it.
type Source struct {
	// Config is the kubeconfig, loaded (and, from files, merged).
	Config *clientcmdapi.Config
	// Where names it in errors: "kubeconfig /home/me/.kube/config",
	// `Secret capi/prod-kubeconfig key "value"`.
	Where string
	// Loader is the loading rules it came from; nil for one from bytes.
	Loader clientcmd.ClientConfigLoader
	// Context is the context to use; empty for the current-context.
	Context string
	// Policy governs its exec plugin and auth providers (see applyPolicy).
	Policy clientcmdapi.PluginPolicy
	// Inline refuses entries that name files of this machine: a kubeconfig
	// from a Secret carries its data inline, and one that names a file here
	// (the pod's own ServiceAccount token, say) would send this process's
	// secrets to a server its author chose.
	Inline bool
}

// Connection maps the chosen context of src to a credential. A broken
// kubeconfig (no current context, a context naming a missing cluster or
// user, a file it names that is missing, unreadable or a directory, a server
// without a scheme) is a permanent error that names the source and the entry.
func Connection(ctx context.Context, src Source, plugins Plugins) (*login.ConnectionInfo, error) {
	// clientcmd writes into the exec entry it maps, and so does
	// applyPolicy: a copy keeps the caller's kubeconfig as it was, and
	// logins on several goroutines apart.
	raw, contextName := src.Config.DeepCopy(), src.Context
	if src.Inline {
		// Not from files of this machine, whatever its entries say they
		// were loaded from: errors name src.Where.
		forgetOrigins(raw)
	}
	if contextName == "" {
		contextName = raw.CurrentContext
	}
	if contextName == "" {
		return nil, login.Permanent(fmt.Errorf("%s: no current-context is set", src.Where))
	}
	kctx, ok := raw.Contexts[contextName]
	if !ok || kctx == nil {
		return nil, login.Permanent(fmt.Errorf("%s: context %q is not defined", src.Where, contextName))
	}
	where := origin(kctx.LocationOfOrigin, src.Where)
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok || cluster == nil {
		return nil, login.Permanent(fmt.Errorf("%s: context %q names cluster %q, which is not defined", where, contextName, kctx.Cluster))
	}
	user, ok := raw.AuthInfos[kctx.AuthInfo]
	if !ok || user == nil {
		return nil, login.Permanent(fmt.Errorf("%s: context %q names user %q, which is not defined", where, contextName, kctx.AuthInfo))
	}
	entries := entries{cluster: cluster, user: user, kctx: kctx, where: where}
	check := entries.readable
	if src.Inline {
		check = entries.inline
	}
	if err := check(); err != nil {
		return nil, login.Permanent(err)
	}

	clientConfig := clientcmd.NewNonInteractiveClientConfig(*raw, contextName, &clientcmd.ConfigOverrides{}, src.Loader)
	cfg, err := clientConfig.ClientConfig()
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("%s: context %q: %w", where, contextName, err))
	}
	clusterWhere := fmt.Sprintf("%s: context %q: cluster %q", origin(cluster.LocationOfOrigin, where), contextName, kctx.Cluster)
	if _, err := serverURL(cfg); err != nil {
		return nil, login.Permanent(fmt.Errorf("%s: %w", clusterWhere, err))
	}
	if err := insecureWithCA(cfg); err != nil {
		return nil, login.Permanent(fmt.Errorf("%s: %w", clusterWhere, err))
	}
	namespace, _, err := clientConfig.Namespace()
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("%s: context %q: %w", where, contextName, err))
	}
	userWhere := fmt.Sprintf("%s: user %q", origin(user.LocationOfOrigin, where), kctx.AuthInfo)
	if err := applyPolicy(cfg, src.Policy); err != nil {
		return nil, login.Permanent(fmt.Errorf("%s: %w", userWhere, err))
	}
	info, err := FromREST(ctx, cfg, cluster.ProxyURL, namespace, plugins)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", userWhere, err)
	}
	// For the vault's line that says this kubeconfig serves.
	whence.Say(ctx, fmt.Sprintf("%s, context %q", where, contextName))
	return info, nil
}

// applyPolicy hands policy to cfg's exec plugin and checks the plugin's env
// against it (PluginEnvAllowed) here, since a config that only client-go
// can serve (impersonation) has client-go run the plugin itself; and it
// refuses an auth provider under any policy but AllowAll: it runs code the
// kubeconfig's author chose (an OIDC refresh to any issuer) just as a
// plugin does.
func applyPolicy(cfg *rest.Config, policy clientcmdapi.PluginPolicy) error {
	// A malformed policy (an Allowlist without its PolicyType) would read
	// as AllowAll below: refused, as client-go refuses it.
	if err := clientexec.ValidatePluginPolicy(policy); err != nil {
		return fmt.Errorf("PluginPolicy: %w", err)
	}
	if cfg.ExecProvider != nil {
		cfg.ExecProvider.PluginPolicy = policy
		if err := PluginEnvAllowed(policy, cfg.ExecProvider.Env); err != nil {
			return fmt.Errorf("exec plugin %q: %w", cfg.ExecProvider.Command, err)
		}
	}
	if cfg.AuthProvider != nil && policy.PolicyType != "" && policy.PolicyType != clientcmdapi.PluginPolicyAllowAll {
		return fmt.Errorf("auth provider %q is not allowed: plugin policy %s", cfg.AuthProvider.Name, policy.PolicyType)
	}
	return nil
}

// origin names an entry by the file it came from, when it came from one
// (a merged kubeconfig records it), else by the whole source.
func origin(location, source string) string {
	if location != "" {
		return "kubeconfig " + location
	}
	return source
}

// forgetOrigins clears the file each entry of raw says it came from.
func forgetOrigins(raw *clientcmdapi.Config) {
	for _, c := range raw.Contexts {
		if c != nil {
			c.LocationOfOrigin = ""
		}
	}
	for _, c := range raw.Clusters {
		if c != nil {
			c.LocationOfOrigin = ""
		}
	}
	for _, u := range raw.AuthInfos {
		if u != nil {
			u.LocationOfOrigin = ""
		}
	}
}
