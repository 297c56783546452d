package piggyback

import (
	"context"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
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
// would use. Without any kubeconfig it returns (nil, nil). It is named
// "kubeconfig $KUBECONFIG or ~/.kube/config"; its metric label is
// "kubeconfig".
func Kubeconfig(ctx context.Context) (*login.ConnectionInfo, error) {
	return KubeconfigFrom(KubeconfigOptions{})(ctx)
}

// KubeconfigFrom returns a handler that logs in as a context of a
// kubeconfig, loaded and merged by client-go's clientcmd on every login, so
// edits to the files are picked up. Every way a kubeconfig user
// authenticates maps to the credential: token (a JWT expires at its exp
// claim, so the files are read again before then), tokenFile (reread),
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
//
// The handler is named "kubeconfig <path>" (with the context when one is
// given); its metric label is "kubeconfig".
func KubeconfigFrom(opts KubeconfigOptions) login.Handler {
	name := "kubeconfig " + kubectlKubeconfig
	if opts.Path != "" {
		name = "kubeconfig " + opts.Path
	}
	if opts.Context != "" {
		name += fmt.Sprintf(" context %q", opts.Context)
	}
	return login.Named(name, "kubeconfig", func(ctx context.Context) (*login.ConnectionInfo, error) {
		rules := defaultRules()
		if opts.Path != "" {
			rules.ExplicitPath = opts.Path
		}
		return redacted(fromKubeconfig(ctx, rules, opts.Context, opts.PluginPolicy))
	})
}

// kubectlKubeconfig names what kubectl reads.
const kubectlKubeconfig = "$KUBECONFIG or ~/.kube/config"

// Kubeconfig, ServiceAccount and ClientGo are functions: they name
// themselves here.
func init() {
	handlerconf.NameFunc(Kubeconfig, "kubeconfig "+kubectlKubeconfig, "kubeconfig")
	handlerconf.NameFunc(ServiceAccount, "service account", "service account")
	handlerconf.NameFunc(ClientGo, "client-go config", "client-go")
}

func fromKubeconfig(ctx context.Context, rules *clientcmd.ClientConfigLoadingRules, contextName string, policy handlers.PluginPolicy) (*login.ConnectionInfo, error) {
	files := existing(rules)
	if len(files) == 0 && rules.ExplicitPath == "" {
		return nil, nil // no kubeconfig at all
	}
	raw, err := rules.Load()
	if err != nil {
		// clientcmd's error names the file and what is wrong with it.
		return nil, login.Permanent(fmt.Errorf("piggyback: %w", err))
	}
	info, err := handlers.Kubeconfig(handlers.KubeconfigConfig{
		Config:       raw,
		Name:         where(rules, files),
		Context:      contextName,
		PluginPolicy: policy,
		LoadingRules: rules,
	})(ctx)
	if err != nil {
		return nil, fmt.Errorf("piggyback: %w", err)
	}
	return info, nil
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

// where names the files that rules would read, for errors.
func where(rules *clientcmd.ClientConfigLoadingRules, files []string) string {
	if rules.ExplicitPath != "" {
		return "kubeconfig " + rules.ExplicitPath
	}
	return "kubeconfig " + strings.Join(files, string(os.PathListSeparator))
}
