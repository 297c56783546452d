package rotation

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/vault"
)

// Side is one run of the workload and what it took.
type Side struct {
	Name  string
	Stats Stats
	// Runs counts the credential plugin's runs.
	Runs int64
}

// CompareOptions describe the comparison: the same workload against the same
// cluster, once through a vault, once through client-go's own exec
// credential plugin support, both with the same plugin fetching tokens that
// the issuer revokes RevokeAfter their issue.
type CompareOptions struct {
	Cluster   *testcluster.Cluster
	Namespace string
	// Plugin is a credential plugin that prints a token it fetches from
	// PLUGIN_FETCH_URL when PLUGIN_MODE is "fetch".
	Plugin      string
	Workers     int
	Duration    time.Duration // for each side
	RevokeAfter time.Duration
}

// Compare runs the workload through a vault, then through plain client-go.
func Compare(ctx context.Context, opts CompareOptions) ([]Side, error) {
	var sides []Side
	for _, name := range []string{"authvault", "client-go exec plugin"} {
		url, runs, stop := opts.Cluster.Issuer.TokenEndpoint(0, opts.RevokeAfter)
		exec := &clientcmdapi.ExecConfig{
			Command: opts.Plugin, APIVersion: "client.authentication.k8s.io/v1",
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			Env:             []clientcmdapi.ExecEnvVar{{Name: "PLUGIN_MODE", Value: "fetch"}, {Name: "PLUGIN_FETCH_URL", Value: url}},
		}
		var cfg *rest.Config
		var v *vault.Vault
		if name == "authvault" {
			v = PluginVault(opts.Cluster, exec)
			var err error
			if cfg, err = v.RESTConfig(ctx); err != nil {
				v.Close()
				stop()
				return nil, err
			}
		} else {
			cfg = PluginConfig(opts.Cluster, exec)
		}
		cfg.QPS, cfg.Burst = -1, 0
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			stop()
			return nil, err
		}
		stats := Run(ctx, cs, opts.Namespace, opts.Workers, opts.Duration, nil)
		sides = append(sides, Side{Name: name, Stats: stats, Runs: runs.Load()})
		if v != nil {
			v.Close()
		}
		stop()
	}
	return sides, nil
}

// Table is the comparison as a Markdown table.
func Table(sides []Side) string {
	var b strings.Builder
	b.WriteString("| | requests | caller-visible 401s | other errors | plugin runs | p50 | p99 | longest stall |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range sides {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s |\n", s.Name, s.Stats.Requests, s.Stats.Unauthorized,
			s.Stats.OtherErrors, s.Runs, round(s.Stats.P50), round(s.Stats.P99), round(s.Stats.Longest))
	}
	return b.String()
}

func round(d time.Duration) string {
	return d.Round(100 * time.Microsecond).String()
}
