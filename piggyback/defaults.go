package piggyback

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/internal/absent"
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
// Each gives nothing when its source is absent, so the first present one
// wins, as with controller-runtime's config.GetConfig; unlike it, a broken
// higher one does not hide a working lower one. Each attempt is bounded by
// FallbackTimeout.
//
// Where ServiceAccount and the others return (nil, nil), these return an
// error that says what they looked for ("piggyback: no --kubeconfig, no
// $KUBECONFIG"), which a vault takes as "nothing from me" and quotes when
// no handler has a credential.
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
	handler   login.Handler // returns an error of nothing when the source is absent
}

// sources are the places Defaults and ClientGo look, highest priority first.
func sources() []source {
	return []source{
		{IDExplicitKubeconfig, "kubeconfig", priorityExplicitKubeconfig, explicitKubeconfig},
		{IDServiceAccount, "service account", priorityServiceAccount, func(ctx context.Context) (*login.ConnectionInfo, error) {
			return serviceAccountIn(ctx, serviceAccountRoot)
		}},
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
		return nil, nothing("no --kubeconfig, no $KUBECONFIG")
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)}
	info, err := redacted(fromKubeconfig(ctx, rules, "", handlers.PluginPolicy{}))
	if info == nil && err == nil {
		return nil, nothing("no --kubeconfig, no file of $KUBECONFIG (" + env + ")")
	}
	return info, err
}

// homeOnly is ~/.kube/config, when it exists.
func homeOnly(ctx context.Context) (*login.ConnectionInfo, error) {
	path := homeKubeconfig()
	if !fileExists(path) {
		return nil, nothing("no " + path)
	}
	return KubeconfigFrom(KubeconfigOptions{Path: path})(ctx)
}

// nothing is the error of a source of Defaults that is absent: what is
// missing, which a vault takes as "nothing from me" (see internal/absent).
func nothing(what string) error { return fmt.Errorf("piggyback: %w", absent.New(what)) }

// orNil turns a source's nothing into (nil, nil), for the handlers
// exported on their own, whose documented "nothing" it is.
func orNil(info *login.ConnectionInfo, err error) (*login.ConnectionInfo, error) {
	if _, ok := absent.What(err); ok {
		return nil, nil
	}
	return info, err
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
