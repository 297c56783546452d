package piggyback

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// Priorities of the fallback handlers: they reproduce controller-runtime's
// order of resolution, with the vault choosing the highest priority that
// gave a credential.
const (
	priorityExplicitKubeconfig = 30
	priorityServiceAccount     = 20
	priorityHomeKubeconfig     = 10
)

// IDs of the fallback handlers: they say where the credential came from
// (Credential.Handler, logs). Their metric labels are shorter: "kubeconfig",
// "service account" and "home kubeconfig".
const (
	IDExplicitKubeconfig = "kubeconfig from --kubeconfig or $KUBECONFIG"
	IDServiceAccount     = "in-cluster service account"
	IDHomeKubeconfig     = "kubeconfig from ~/.kube/config"
)

// FallbackTimeout bounds each login attempt of a fallback handler (the
// login.Timeout of every registration Defaults returns): an exec plugin
// that hangs, or a kubeconfig on a stuck network file system, fails its
// attempt after a minute and is retried with backoff, instead of keeping its
// source logging in forever.
const FallbackTimeout = time.Minute

// Defaults are the handlers a vault falls back on when the operator
// registers none: the kubeconfig named by --kubeconfig or $KUBECONFIG, the
// in-cluster ServiceAccount, and ~/.kube/config, in that order of priority.
// Each returns nothing when its source is absent, so the first present one
// wins, as with controller-runtime's config.GetConfig; unlike it, a broken
// higher one does not hide a working lower one. Each attempt is bounded by
// FallbackTimeout.
func Defaults() []login.Registration {
	var regs []login.Registration
	for _, src := range sources() {
		regs = append(regs, login.Registration{
			Handler: login.Named(src.id, src.label, withPriority(src.handler, src.priority)),
			Options: []login.Option{login.Timeout(FallbackTimeout)},
		})
	}
	return regs
}

// source is one place a process finds its configuration, as
// controller-runtime's config.GetConfig looks for it.
type source struct {
	id, label string // its name and its metric label (see login.Named)
	priority  int
	handler   login.Handler
}

// sources are the places Defaults and ClientGo look, highest priority first.
func sources() []source {
	return []source{
		{IDExplicitKubeconfig, "kubeconfig", priorityExplicitKubeconfig, explicitKubeconfig},
		{IDServiceAccount, "service account", priorityServiceAccount, ServiceAccount},
		{IDHomeKubeconfig, "home kubeconfig", priorityHomeKubeconfig, homeOnly},
	}
}

// explicitKubeconfig is the kubeconfig the flag or $KUBECONFIG names.
func explicitKubeconfig(ctx context.Context) (*login.ConnectionInfo, error) {
	if path := kubeconfigFlagValue(); path != "" {
		return KubeconfigFrom(KubeconfigOptions{Path: path})(ctx)
	}
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	if env == "" {
		return nil, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)}
	return redacted(fromKubeconfig(ctx, rules, "", handlers.PluginPolicy{}))
}

// homeOnly is ~/.kube/config, when it exists.
func homeOnly(ctx context.Context) (*login.ConnectionInfo, error) {
	path := homeKubeconfig()
	if !fileExists(path) {
		return nil, nil
	}
	return KubeconfigFrom(KubeconfigOptions{Path: path})(ctx)
}

// withPriority sets the priority of what h returns.
func withPriority(h login.Handler, priority int) login.Handler {
	return func(ctx context.Context) (*login.ConnectionInfo, error) {
		info, err := h(ctx)
		if info != nil {
			info.Priority = priority
		}
		return info, err
	}
}
