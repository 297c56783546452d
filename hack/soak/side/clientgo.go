package side

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/authvault/authvault/hack/soak/wire"
)

// clientGoSide is the same as authvaultSide, the way controllers do it
// today: client-go's exec plugin for the hub (client-go takes one way to
// authenticate, so the token file is not read), a clientset rebuilt from
// each Secret and profile as it changes, and controller-runtime's metrics
// filter in front of the addon.
func clientGoSide(_ context.Context, cfg wire.Config, log logr.Logger) (*plumbing, error) {
	providers, err := readProviders(cfg.ProviderFile)
	if err != nil {
		return nil, err
	}
	hub := &rest.Config{
		Host:            cfg.Server,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cfg.CAFile},
		ExecProvider: &clientcmdapi.ExecConfig{
			Command: cfg.PluginCommand, Env: pluginEnv(cfg.PluginEnv), APIVersion: execAPIVersion,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		},
	}
	cs, err := kubernetes.NewForConfig(hub)
	if err != nil {
		return nil, fmt.Errorf("soak: a client for the hub: %w", err)
	}
	dyn, err := dynamic.NewForConfig(hub)
	if err != nil {
		return nil, fmt.Errorf("soak: a client for the hub: %w", err)
	}
	httpClient, err := rest.HTTPClientFor(hub)
	if err != nil {
		return nil, fmt.Errorf("soak: a client for the hub: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(hub, httpClient)
	if err != nil {
		return nil, fmt.Errorf("soak: the addon's filter: %w", err)
	}
	f := newClientGoFleet(log.WithName("fleet"), providers)
	return &plumbing{
		hub:   hub,
		fleet: f,
		front: func(upstream http.Handler) (http.Handler, error) {
			return filter(log.WithName("addon"), upstream)
		},
		authorize: true,
		run: func(ctx context.Context) {
			f.run(ctx, cs, dyn, cfg.SecretsNamespace, cfg.ProfilesNamespace)
		},
		close: func() {},
	}, nil
}
