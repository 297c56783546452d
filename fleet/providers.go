package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ProviderFileFlag is the name of the flag by which SIG-Multicluster's
// controllers take their provider file (KEP-5339), for a program that takes
// one too, under the name its users know:
//
//	path := flag.String(fleet.ProviderFileFlag, "", "the access providers for ClusterProfiles")
const ProviderFileFlag = "clusterprofile-provider-file"

// AccessProvider is an entry of a provider file (KEP-5339): how this process
// reaches the clusters whose ClusterProfile offers an access provider of
// this name. It is the process's own configuration, trusted as a kubeconfig
// file is: its plugin runs with the cluster's information from the profile.
type AccessProvider struct {
	// Name matches the name of an access provider in a ClusterProfile's
	// status ("google", "eks", "secretreader"…).
	Name string `json:"name"`
	// ExecConfig is the credential plugin to run, as a kubeconfig's exec
	// user: command, args, env, apiVersion (client.authentication.k8s.io/v1
	// or v1beta1), provideClusterInfo. A plugin that a native cloud login
	// serves (handlers.UseNative) runs in process instead.
	ExecConfig *clientcmdapi.ExecConfig `json:"execConfig"`
	// Federated, set in Go instead of ExecConfig (a provider file has no
	// such field), serves the provider in process with no stored
	// credential: tokens the hub mints for a ServiceAccount of the
	// profile's own namespace, as for a Flux ConfigMap (WatchFlux).
	Federated *FederatedAccess `json:"-"`
	// ProfileSourcedCLIArgsPolicy says what to do with the arguments a
	// profile adds (its extension ExtraArgsExtension): "Append" them to
	// the plugin's, or "Ignore" them (the default). Append trusts whoever
	// writes profiles with the plugin's command line, which no policy
	// checks: a flag that names a file or an endpoint (kubelogin's
	// --federated-token-file and --authority-host, a --kubeconfig, a
	// --token-file) sends this machine's secrets where they choose, and a
	// debug flag may print the token to the plugin's stderr. Set it only
	// for a plugin none of whose flags can. An EKS provider needs it (each
	// profile gives its own --cluster-name), and its profiles' writers then
	// choose every flag of aws (--endpoint-url, --profile, --debug…), or,
	// served natively, the cluster, --role-arn and --region: whichever role
	// this process can assume, for whichever cluster it can reach
	// (DescribeCluster still keeps the token from other servers). What
	// the provider's own args or env set (fix the region and the role
	// there), a profile may not set again by any name or spelling the
	// plugin reads: the plugin takes the last. For a plugin whose flags
	// this package does not know, a profile may then add no flag at all
	// (see "Arguments a profile adds" in the package doc).
	ProfileSourcedCLIArgsPolicy string `json:"profileSourcedCLIArgsPolicy,omitempty"`
	// ProfileSourcedEnvVarsPolicy says what to do with the environment a
	// profile adds (ExtraEnvExtension): "AppendIfNotExists" (the
	// plugin's own values win), "Replace" (the profile's win), or "Ignore"
	// (the default). Under the watch's plugin policy, a variable that
	// steers a plugin (PATH, HOME, LD_PRELOAD, AWS_ENDPOINT_URL_*…) is
	// refused whoever set it, the provider file too: set those in this
	// process's environment, which the plugin inherits. Such a profile's
	// cluster is added, and its logins fail, naming the variable.
	ProfileSourcedEnvVarsPolicy string `json:"profileSourcedEnvVarsPolicy,omitempty"`
}

// The values of AccessProvider's ProfileSourcedCLIArgsPolicy (Args…) and
// ProfileSourcedEnvVarsPolicy (Env…), for a provider built in Go rather
// than read with ReadProviderFile.
const (
	ArgsAppend            = "Append"
	ArgsIgnore            = "Ignore"
	EnvAppendIfNotExists  = "AppendIfNotExists"
	EnvReplace            = "Replace"
	EnvIgnore             = "Ignore"
	execAPIVersionV1      = "client.authentication.k8s.io/v1"
	execAPIVersionV1beta1 = "client.authentication.k8s.io/v1beta1"
)

// providerFile is a provider file's content.
type providerFile struct {
	Providers []AccessProvider `json:"providers"`
}

// ReadProviderFile reads a provider file, as KEP-5339 lays it out:
//
//	{"providers": [{"name": "google", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1beta1",
//	  "command": "gke-gcloud-auth-plugin", "provideClusterInfo": true}}]}
//
// A field it does not know, a provider without a name or command, two of
// one name, an apiVersion that is not client.authentication.k8s.io's or a
// policy value not listed is an error naming the file and the provider: a
// typo is never ignored.
func ReadProviderFile(path string) ([]AccessProvider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fleet: provider file: %w", err)
	}
	providers, err := parseProviders(data)
	if err != nil {
		return nil, fmt.Errorf("fleet: provider file %s%w", path, err)
	}
	return providers, nil
}

// parseProviders reads a provider file's content; its errors begin with
// ": " or " ", to follow the file's name.
func parseProviders(data []byte) ([]AccessProvider, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f providerFile
	if err := dec.Decode(&f); err != nil {
		if _, ok := errors.AsType[*json.SyntaxError](err); ok {
			// A YAML file, most likely: kubeconfigs are.
			return nil, fmt.Errorf(" is not JSON, which KEP-5339's provider file is: %w", err)
		}
		return nil, fmt.Errorf(": %w", err)
	}
	if dec.More() {
		return nil, errors.New(": more than one JSON value")
	}
	if err := checkProviders(f.Providers); err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	return f.Providers, nil
}

// checkProviders tells what is wrong with providers, if anything.
func checkProviders(providers []AccessProvider) error {
	if len(providers) == 0 {
		return errors.New("no providers")
	}
	seen := map[string]bool{}
	for i, p := range providers {
		switch {
		case p.Name == "":
			return fmt.Errorf("provider %d has no name", i)
		case seen[p.Name]:
			return fmt.Errorf("two providers are named %q", p.Name)
		case p.Federated != nil && p.ExecConfig != nil:
			return fmt.Errorf("provider %q has both an execConfig and Federated: one says how its clusters are reached", p.Name)
		case p.Federated != nil:
			if err := p.Federated.check(); err != nil {
				return fmt.Errorf("provider %q: %w", p.Name, err)
			}
			seen[p.Name] = true
			continue
		case p.ExecConfig == nil || p.ExecConfig.Command == "":
			return fmt.Errorf("provider %q has no execConfig with a command", p.Name)
		case p.ExecConfig.APIVersion != execAPIVersionV1 && p.ExecConfig.APIVersion != execAPIVersionV1beta1:
			return fmt.Errorf("provider %q: execConfig apiVersion %q is neither %s nor %s", p.Name, p.ExecConfig.APIVersion, execAPIVersionV1, execAPIVersionV1beta1)
		}
		switch p.ProfileSourcedCLIArgsPolicy {
		case "", ArgsAppend, ArgsIgnore:
		default:
			return fmt.Errorf("provider %q: profileSourcedCLIArgsPolicy %q is not %s or %s", p.Name, p.ProfileSourcedCLIArgsPolicy, ArgsAppend, ArgsIgnore)
		}
		switch p.ProfileSourcedEnvVarsPolicy {
		case "", EnvAppendIfNotExists, EnvReplace, EnvIgnore:
		default:
			return fmt.Errorf("provider %q: profileSourcedEnvVarsPolicy %q is not %s, %s or %s", p.Name, p.ProfileSourcedEnvVarsPolicy,
				EnvAppendIfNotExists, EnvReplace, EnvIgnore)
		}
		seen[p.Name] = true
	}
	return nil
}
