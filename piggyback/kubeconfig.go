package piggyback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/internal/pemdata"
	"github.com/authvault/authvault/internal/redact"
	"github.com/authvault/authvault/login"
)

// KubeconfigOptions choose a kubeconfig and a context in it.
type KubeconfigOptions struct {
	// Path is the kubeconfig file. Default: client-go's loading rules,
	// $KUBECONFIG as a list of paths (the first definition of an entry
	// wins), else ~/.kube/config.
	Path string
	// Context is the context to use. Default: the current-context.
	Context string
	// PluginPolicy says which exec plugins the kubeconfig's user may run
	// (handlers.Exec honours it as client-go does) and, when it is not
	// AllowAll, refuses auth providers too. Default: the zero value, which
	// allows all, as client-go does for a kubeconfig file; a kubeconfig
	// someone else wrote deserves handlers.DenyAll or an Allowlist.
	PluginPolicy handlers.PluginPolicy
}

// Kubeconfig logs in as the current context of the kubeconfig that kubectl
// would use. Without any kubeconfig it returns (nil, nil).
func Kubeconfig(ctx context.Context) (*login.ConnectionInfo, error) {
	return KubeconfigFrom(KubeconfigOptions{})(ctx)
}

// KubeconfigFrom returns a handler that logs in as a context of a
// kubeconfig, loaded and merged by client-go's clientcmd on every login, so
// edits to the files are picked up. Every way a kubeconfig user
// authenticates maps to the credential: token, tokenFile (reread),
// basic auth, client certificate and key (files or data), exec plugins
// (through handlers.Exec, with the cluster's information) and auth providers
// (through client-go's own transport); with the cluster's CA,
// insecure-skip-tls-verify, tls-server-name, proxy-url and the context's
// namespace. Relative paths are resolved against the file they appear in.
//
// A broken kubeconfig (bad YAML, no current context, a context naming a
// missing cluster or user, a file it names that is missing, unreadable or a
// directory, a server without a scheme) is a permanent error that names the
// file and the entry.
func KubeconfigFrom(opts KubeconfigOptions) login.Handler {
	return func(ctx context.Context) (*login.ConnectionInfo, error) {
		rules := defaultRules()
		if opts.Path != "" {
			rules.ExplicitPath = opts.Path
		}
		return redacted(fromKubeconfig(ctx, rules, opts.Context, opts.PluginPolicy))
	}
}

func fromKubeconfig(ctx context.Context, rules *clientcmd.ClientConfigLoadingRules, contextName string, policy handlers.PluginPolicy) (*login.ConnectionInfo, error) {
	files := existing(rules)
	if len(files) == 0 && rules.ExplicitPath == "" {
		return nil, nil // no kubeconfig at all
	}
	where := "kubeconfig " + strings.Join(files, string(os.PathListSeparator))
	if rules.ExplicitPath != "" {
		where = "kubeconfig " + rules.ExplicitPath
	}
	raw, err := rules.Load()
	if err != nil {
		// clientcmd's error names the file and what is wrong with it.
		return nil, login.Permanent(fmt.Errorf("piggyback: %w", err))
	}
	if contextName == "" {
		contextName = raw.CurrentContext
	}
	if contextName == "" {
		return nil, login.Permanent(fmt.Errorf("piggyback: %s: no current-context is set", where))
	}
	kctx, ok := raw.Contexts[contextName]
	if !ok {
		return nil, login.Permanent(fmt.Errorf("piggyback: %s: context %q is not defined", where, contextName))
	}
	where = "kubeconfig " + origin(kctx.LocationOfOrigin, where)
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok {
		return nil, login.Permanent(fmt.Errorf("piggyback: %s: context %q names cluster %q, which is not defined", where, contextName, kctx.Cluster))
	}
	user, ok := raw.AuthInfos[kctx.AuthInfo]
	if !ok {
		return nil, login.Permanent(fmt.Errorf("piggyback: %s: context %q names user %q, which is not defined", where, contextName, kctx.AuthInfo))
	}
	if err := readable(cluster, user, kctx); err != nil {
		return nil, login.Permanent(err)
	}

	clientConfig := clientcmd.NewNonInteractiveClientConfig(*raw, contextName, &clientcmd.ConfigOverrides{}, rules)
	cfg, err := clientConfig.ClientConfig()
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("piggyback: %s: context %q: %w", where, contextName, err))
	}
	clusterWhere := fmt.Sprintf("kubeconfig %s: context %q: cluster %q", origin(cluster.LocationOfOrigin, where), contextName, kctx.Cluster)
	if _, err := serverURL(cfg); err != nil {
		return nil, login.Permanent(fmt.Errorf("piggyback: %s: %w", clusterWhere, err))
	}
	if err := insecureWithCA(cfg); err != nil {
		return nil, login.Permanent(fmt.Errorf("piggyback: %s: %w", clusterWhere, err))
	}
	namespace, _, err := clientConfig.Namespace()
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("piggyback: %s: context %q: %w", where, contextName, err))
	}
	userWhere := fmt.Sprintf("kubeconfig %s: user %q", origin(user.LocationOfOrigin, where), kctx.AuthInfo)
	if err := applyPolicy(cfg, policy); err != nil {
		return nil, login.Permanent(fmt.Errorf("piggyback: %s: %w", userWhere, err))
	}
	info, err := fromRESTConfig(ctx, cfg, cluster.ProxyURL, namespace)
	if err != nil {
		return nil, fmt.Errorf("piggyback: %s: %w", userWhere, err)
	}
	return info, nil
}

// applyPolicy hands policy to cfg's exec plugin, and refuses an auth
// provider under any policy but AllowAll: it runs code the kubeconfig's
// author chose (an OIDC refresh to any issuer) just as a plugin does.
func applyPolicy(cfg *rest.Config, policy handlers.PluginPolicy) error {
	if cfg.ExecProvider != nil {
		cfg.ExecProvider.PluginPolicy = policy
	}
	if cfg.AuthProvider != nil && policy.PolicyType != "" && policy.PolicyType != clientcmdapi.PluginPolicyAllowAll {
		return fmt.Errorf("auth provider %q is not allowed: plugin policy %s", cfg.AuthProvider.Name, policy.PolicyType)
	}
	return nil
}

// redacted hides URL user info in err: clientcmd's and url.Parse's errors
// quote a server or proxy-url verbatim, password included. Every handler of
// this package returns its errors through it.
func redacted(info *login.ConnectionInfo, err error) (*login.ConnectionInfo, error) {
	return info, redact.Error(err)
}

// existing lists the kubeconfig files the rules would read that exist.
func existing(rules *clientcmd.ClientConfigLoadingRules) []string {
	var files []string
	for _, f := range rules.GetLoadingPrecedence() {
		if fileExists(f) {
			files = append(files, f)
		}
	}
	return files
}

func origin(location, fallback string) string {
	if location != "" {
		return location
	}
	return strings.TrimPrefix(fallback, "kubeconfig ")
}

// readable checks that every file the entries name is a regular file that
// can be read, so that a missing certificate, or a path naming a directory,
// fails here, permanently and named with its entry and field, rather than
// later in the transport, retryably and anonymously.
func readable(cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo, kctx *clientcmdapi.Context) error {
	checks := []struct {
		entry, kind, name, field, path string
		pem                            bool
	}{
		{cluster.LocationOfOrigin, "cluster", kctx.Cluster, "certificate-authority", cluster.CertificateAuthority, true},
		{user.LocationOfOrigin, "user", kctx.AuthInfo, "client-certificate", user.ClientCertificate, true},
		{user.LocationOfOrigin, "user", kctx.AuthInfo, "client-key", user.ClientKey, true},
		{user.LocationOfOrigin, "user", kctx.AuthInfo, "tokenFile", user.TokenFile, false},
	}
	var errs []error
	for _, c := range checks {
		if c.path == "" {
			continue
		}
		if err := readableFile(c.path, c.pem); err != nil {
			errs = append(errs, fmt.Errorf("piggyback: kubeconfig %s: %s %q: %s: %w", c.entry, c.kind, c.name, c.field, err))
		}
	}
	return errors.Join(errs...)
}

// maxPEMFile bounds what is read of a CA, certificate or key file.
const maxPEMFile = 1 << 20

// readableFile checks that path is a regular file (after symbolic links, as
// mounted Secrets use them) that this process can open, and, with pem, that
// it holds PEM (a wrong file, a truncated write), so that the login fails
// here, naming the entry, rather than later in the vault. It checks the kind
// first: opening a FIFO would block. The error never quotes the content.
func readableFile(path string, pem bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		kind := "not a regular file"
		if fi.IsDir() {
			kind = "a directory"
		}
		return fmt.Errorf("%s is %s", path, kind)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if !pem {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	switch {
	case err != nil:
		return err
	case len(data) > maxPEMFile:
		return fmt.Errorf("%s is larger than %d bytes", path, maxPEMFile)
	case len(data) == 0:
		return fmt.Errorf("%s is empty", path)
	}
	if _, err := pemdata.Decode(data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
