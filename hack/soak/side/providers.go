package side

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
)

// provider is an entry of a provider file (KEP-5339), as the client-go
// side reads it: SIG-Multicluster's own library is not served by the
// module proxy, and authvault's fleet is what the other side uses.
type provider struct {
	Name       string                  `json:"name"`
	ExecConfig *clientcmdv1.ExecConfig `json:"execConfig"`
	ArgsPolicy string                  `json:"profileSourcedCLIArgsPolicy,omitempty"` // "Append" or ignored
	EnvPolicy  string                  `json:"profileSourcedEnvVarsPolicy,omitempty"` // "AppendIfNotExists", "Replace" or ignored
}

// The extensions of a profile's cluster that carry the plugin's extra
// arguments and environment (KEP-5339).
const (
	extraArgsExtension = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
	extraEnvExtension  = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"
)

// readProviders reads a provider file.
func readProviders(path string) ([]provider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("soak: provider file: %w", err)
	}
	var file struct {
		Providers []provider `json:"providers"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("soak: provider file %s: %w", path, err)
	}
	for _, p := range file.Providers {
		if p.Name == "" || p.ExecConfig == nil || p.ExecConfig.Command == "" {
			return nil, fmt.Errorf("soak: provider file %s: a provider without a name or command", path)
		}
	}
	return file.Providers, nil
}

// offered is an access provider as a profile's status lists it.
type offered struct {
	Name    string              `json:"name"`
	Cluster clientcmdv1.Cluster `json:"cluster"`
}

// profileConfig is the config of the cluster of the ClusterProfile p:
// the first of providers that p offers, its plugin given the profile's
// arguments and environment as the provider's policies say, built as a
// kubeconfig of one context with clientcmd.
func profileConfig(p *unstructured.Unstructured, providers []provider) (*rest.Config, error) {
	var status struct {
		AccessProviders []offered `json:"accessProviders"`
	}
	raw, err := json.Marshal(p.Object["status"])
	if err == nil {
		err = json.Unmarshal(raw, &status)
	}
	if err != nil {
		return nil, fmt.Errorf("soak: ClusterProfile %s/%s: its status: %w", p.GetNamespace(), p.GetName(), err)
	}
	for _, prov := range providers {
		i := slices.IndexFunc(status.AccessProviders, func(o offered) bool { return o.Name == prov.Name })
		if i < 0 {
			continue
		}
		cluster := status.AccessProviders[i].Cluster
		exec, err := withProfileExtras(*prov.ExecConfig, prov, cluster)
		if err != nil {
			return nil, fmt.Errorf("soak: ClusterProfile %s/%s: %w", p.GetNamespace(), p.GetName(), err)
		}
		data, err := json.Marshal(clientcmdv1.Config{
			APIVersion: "v1", Kind: "Config", CurrentContext: "profile",
			Clusters:  []clientcmdv1.NamedCluster{{Name: "profile", Cluster: cluster}},
			AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: "profile", AuthInfo: clientcmdv1.AuthInfo{Exec: &exec}}},
			Contexts:  []clientcmdv1.NamedContext{{Name: "profile", Context: clientcmdv1.Context{Cluster: "profile", AuthInfo: "profile"}}},
		})
		if err != nil {
			return nil, err
		}
		return clientcmd.RESTConfigFromKubeConfig(data)
	}
	return nil, fmt.Errorf("soak: ClusterProfile %s/%s offers none of the provider file's providers", p.GetNamespace(), p.GetName())
}

// withProfileExtras is exec with the arguments and environment that
// cluster's extensions add, as prov's policies allow.
func withProfileExtras(exec clientcmdv1.ExecConfig, prov provider, cluster clientcmdv1.Cluster) (clientcmdv1.ExecConfig, error) {
	exec.Args, exec.Env = slices.Clone(exec.Args), slices.Clone(exec.Env)
	if exec.InteractiveMode == "" {
		exec.InteractiveMode = clientcmdv1.NeverExecInteractiveMode
	}
	for _, ext := range cluster.Extensions {
		switch {
		case ext.Name == extraArgsExtension && prov.ArgsPolicy == "Append":
			var args []string
			if err := json.Unmarshal(ext.Extension.Raw, &args); err != nil {
				return exec, fmt.Errorf("its %s extension: %w", ext.Name, err)
			}
			exec.Args = append(exec.Args, args...)
		case ext.Name == extraEnvExtension && (prov.EnvPolicy == "AppendIfNotExists" || prov.EnvPolicy == "Replace"):
			var env map[string]string
			if err := json.Unmarshal(ext.Extension.Raw, &env); err != nil {
				return exec, fmt.Errorf("its %s extension: %w", ext.Name, err)
			}
			for _, name := range slices.Sorted(maps.Keys(env)) {
				i := slices.IndexFunc(exec.Env, func(v clientcmdv1.ExecEnvVar) bool { return v.Name == name })
				switch {
				case i < 0:
					exec.Env = append(exec.Env, clientcmdv1.ExecEnvVar{Name: name, Value: env[name]})
				case prov.EnvPolicy == "Replace":
					exec.Env[i].Value = env[name]
				}
			}
		}
	}
	return exec, nil
}
