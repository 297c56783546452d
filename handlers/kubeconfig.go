package handlers

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers/internal/kubeconf"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// KubeconfigConfig is a kubeconfig already loaded, from wherever the
// operator keeps it (a secret manager, a custom resource, clientcmd.Load
// of bytes), and what to take from it.
type KubeconfigConfig struct {
	// Config is the kubeconfig. Required. The handler reads it at every
	// login and never changes it; nor may the caller once the handler has
	// it (that would race with a login). To rotate a kubeconfig, build a
	// handler per login from the one current then, as fleet does for a
	// ClusterProfile: handlers.Kubeconfig(cfg)(ctx).
	Config *clientcmdapi.Config
	// Name says where the kubeconfig came from ("kubeconfig of tenant
	// a"): the handler's name, and the start of its errors. Default:
	// "kubeconfig".
	Name string
	// Context is the context to use. Default: the current-context.
	Context string
	// PluginPolicy says which exec plugins the kubeconfig may run, and
	// whether it may use an auth provider (only under AllowAll); build it
	// with Allowlist, AllowAll or DenyAll (an Allowlist without its
	// PolicyType is refused, as client-go refuses it). Default:
	// DenyAll for a kubeconfig from elsewhere, as for a Secret's (see
	// KubeconfigSecretConfig.PluginPolicy); with LoadingRules, client-go's
	// default for files, which allows all.
	PluginPolicy PluginPolicy
	// LoadingRules are the files of this machine the kubeconfig was loaded
	// from, when it was. With them, its entries may name files of this
	// machine and an auth provider's refreshed token is written back, as
	// kubectl does. Without them, an entry that names a file
	// (certificate-authority, client-key, tokenFile…) is refused: it would
	// be a file of this machine, the pod's own ServiceAccount token, say,
	// which whoever wrote the kubeconfig could send to a server of their
	// choosing.
	LoadingRules *clientcmd.ClientConfigLoadingRules
}

// Kubeconfig returns a handler that logs in as a context of cfg.Config,
// with clientcmd's semantics, as piggyback.KubeconfigFrom does for the
// files it loads: token (a JWT expires at its exp claim), tokenFile, basic
// auth, client certificate and key, exec plugins (through Exec, under
// cfg.PluginPolicy) and auth providers (through client-go's own transport),
// with the cluster's CA, insecure-skip-tls-verify, tls-server-name,
// proxy-url and the context's namespace.
//
// A broken kubeconfig (no current context, a context naming a missing
// cluster or user, a file it names that is missing or refused, a server
// without a scheme) is a permanent error that names cfg.Name and the
// entry, never the kubeconfig's content.
//
// The handler is named cfg.Name; its metric label is "kubeconfig".
func Kubeconfig(cfg KubeconfigConfig) login.Handler {
	if cfg.Name == "" {
		cfg.Name = "kubeconfig"
	}
	if cfg.LoadingRules == nil && policyUnset(cfg.PluginPolicy) {
		cfg.PluginPolicy = DenyAll
	}
	return login.Named(cfg.Name, "kubeconfig", func(ctx context.Context) (*login.ConnectionInfo, error) {
		if cfg.Config == nil {
			return nil, login.Permanent(fmt.Errorf("handlers: %s: KubeconfigConfig has no Config", cfg.Name))
		}
		src := kubeconf.Source{
			Config:  cfg.Config,
			Where:   cfg.Name,
			Context: cfg.Context,
			Policy:  cfg.PluginPolicy,
			Inline:  cfg.LoadingRules == nil,
		}
		if cfg.LoadingRules != nil {
			// A nil *ClientConfigLoadingRules in the interface would not
			// be a nil interface.
			src.Loader = cfg.LoadingRules
		}
		info, err := kubeconf.Connection(ctx, src, kubeconfigPlugins)
		if err != nil {
			return nil, redact.Error(fmt.Errorf("handlers: %w", err))
		}
		return info, nil
	})
}

// RESTConfig returns a handler that turns a client-go config the operator
// already has into a credential on every login. Token (a JWT expires at its
// exp claim), basic auth, client certificate and CA map to fields; a token
// file is reread like TokenFile's; an exec provider runs through Exec, so
// its expiry drives the vault's refresh. Whatever only client-go can do (an
// auth provider, WrapTransport, a custom Transport, Dial, a Proxy function,
// impersonation) keeps client-go's own round tripper as the credential's
// Transport. Unlike client-go, a Host without a scheme is not taken for
// plain http: the login fails, permanently.
//
// The handler is named "rest.Config <host>" (user info redacted); its
// metric label is "rest.Config".
func RESTConfig(cfg *rest.Config) login.Handler {
	if cfg == nil {
		return login.Named("rest.Config", "rest.Config", func(context.Context) (*login.ConnectionInfo, error) {
			return nil, login.Permanent(errors.New("handlers: RESTConfig was given a nil *rest.Config"))
		})
	}
	return login.Named("rest.Config "+redact.URL(cfg.Host), "rest.Config", func(ctx context.Context) (*login.ConnectionInfo, error) {
		info, err := kubeconf.FromREST(ctx, cfg, "", "", kubeconfigPlugins)
		if err != nil {
			return nil, redact.Error(fmt.Errorf("handlers: rest.Config: %w", err))
		}
		return info, nil
	})
}

// policyUnset tells whether policy is the zero value, which a handler's
// default replaces; an Allowlist without its PolicyType is not: client-go
// refuses it, and so does the login.
func policyUnset(policy PluginPolicy) bool {
	return policy.PolicyType == "" && policy.Allowlist == nil
}
