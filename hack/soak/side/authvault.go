package side

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/hack/soak/wire"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// authvaultSide is everything through authvault, as an operator's author
// writes it: a vault for the hub with the plugin and the token file, a
// fleet from the Secrets and the ClusterProfiles, addonauth in front of
// the addon.
func authvaultSide(ctx context.Context, cfg wire.Config, log logr.Logger) (*plumbing, error) {
	providers, err := fleet.ReadProviderFile(cfg.ProviderFile)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	v := vault.New(vault.Options{Logger: log.WithName("authvault"), Registerer: metrics.Registry})
	cluster := login.ConnectionInfo{Server: cfg.Server, CAPath: cfg.CAFile}
	v.OnLogin(handlers.Exec(handlers.ExecConfig{
		ExecConfig: clientcmdapi.ExecConfig{
			Command: cfg.PluginCommand, Env: pluginEnv(cfg.PluginEnv), APIVersion: execAPIVersion,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode, PluginPolicy: handlers.Allowlist(cfg.PluginCommand),
		},
		Cluster: cluster,
	}), login.Timeout(30*time.Second))
	v.OnLogin(handlers.TokenFile(cfg.TokenFile, cluster), login.Timeout(10*time.Second))
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = v.Shutdown(ctx)
	}
	hub, err := v.RESTConfig(ctx)
	if err != nil {
		shutdown()
		return nil, fmt.Errorf("soak: the hub's vault: %w", err)
	}
	addon, err := addonauth.New(addonauth.Options{
		Audience: cfg.AddonAudience, Config: hub,
		Logger: log.WithName("addonauth"), Registerer: metrics.Registry,
	})
	if err != nil {
		shutdown()
		return nil, fmt.Errorf("soak: %w", err)
	}
	opts := fleet.Options{Logger: log.WithName("fleet"), Registerer: metrics.Registry}
	if cfg.ShardGroup != "" {
		// Leader election's timings, shortened: a replica killed lets its
		// clusters go within 9 s, well inside the fault's grace.
		opts.Shards = &fleet.Shards{Config: hub, Namespace: cfg.ShardNamespace, Group: cfg.ShardGroup, Identity: cfg.Side,
			LeaseDuration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}
	}
	f := fleet.New(opts)
	av := &authvaultFleet{fleet: f, sharded: opts.Shards != nil, clients: map[string]fleetClient{}}
	var owned func() []string
	if av.sharded {
		owned = av.names
	}
	return &plumbing{
		owned:       owned,
		hub:         hub,
		fleet:       av,
		front:       func(upstream http.Handler) (http.Handler, error) { return addon.Middleware(upstream), nil },
		audiences:   []string{cfg.AddonAudience},
		countLogins: true,
		run: func(ctx context.Context) {
			// Beside the manager, not in it: the manager is started
			// again when it stops, and the fleet lives through that.
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := f.WatchSecrets(ctx, fleet.SecretsOptions{Config: hub, Namespace: cfg.SecretsNamespace}); err != nil {
					log.Error(err, "watching the fleet's Secrets")
				}
			})
			wg.Go(func() {
				err := f.WatchClusterProfiles(ctx, fleet.ProfilesOptions{Config: hub, Namespace: cfg.ProfilesNamespace, Providers: providers})
				if err != nil {
					log.Error(err, "watching the fleet's ClusterProfiles")
				}
			})
			wg.Wait()
		},
		close: func() {
			f.Close()
			shutdown()
		},
	}, nil
}

// authvaultFleet is a fleet.Fleet, with a clientset for each cluster's
// config: that config is the same object while the cluster stays.
type authvaultFleet struct {
	fleet   *fleet.Fleet
	sharded bool // with fleet.Shards: the side has only the clusters it owns

	mu      sync.Mutex // guards clients
	clients map[string]fleetClient
}

type fleetClient struct {
	cfg *rest.Config
	cs  kubernetes.Interface
}

func (a *authvaultFleet) names() []string {
	names := a.fleet.Names()
	if a.sharded {
		// Only those this replica owns: another's have no vault here.
		names = slices.DeleteFunc(names, func(name string) bool { return a.fleet.Vault(name) == nil })
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for name := range a.clients {
		if a.fleet.Vault(name) == nil {
			delete(a.clients, name)
		}
	}
	return names
}

// moved says whether the fleet has the cluster and this replica does not
// own it: not this side's to read, and no failure of its reads. Whether
// another replica owns it, the report checks in the samples' Owned.
func (a *authvaultFleet) moved(name string) bool {
	return a.sharded && a.fleet.Vault(name) == nil && slices.Contains(a.fleet.Names(), name)
}

func (a *authvaultFleet) client(ctx context.Context, name string) (kubernetes.Interface, error) {
	cfg, err := a.fleet.RESTConfig(ctx, name)
	if errors.Is(err, fleet.ErrUnknownCluster) {
		return nil, errNoCluster
	}
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[name]; ok && c.cfg == cfg {
		return c.cs, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	a.clients[name] = fleetClient{cfg: cfg, cs: cs}
	return cs, nil
}
