package fleet

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"

	"github.com/authvault/authvault/login"
)

// The extensions of a profile's cluster that KEP-5339 reserves: the watch
// reads them; they are exported for whoever writes ClusterProfiles' status
// (an inventory's controller, a test's profiles).
const (
	// ExecExtension is client-go's: its value reaches the plugin as
	// spec.cluster.config of KUBERNETES_EXEC_INFO, when the provider sets
	// provideClusterInfo.
	ExecExtension = "client.authentication.k8s.io/exec"
	// ExtraArgsExtension holds arguments for the plugin, a list of
	// strings, used as the provider's ProfileSourcedCLIArgsPolicy says.
	ExtraArgsExtension = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
	// ExtraEnvExtension holds environment variables for the plugin, a map
	// of strings, used as the provider's ProfileSourcedEnvVarsPolicy says.
	ExtraEnvExtension = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"
)

// offered is an access provider as a profile's status lists it.
type offered struct {
	Name    string              `json:"name"`
	Cluster clientcmdv1.Cluster `json:"cluster"`
}

// profileStatus is what the watch reads of a ClusterProfile: both lists,
// accessProviders and the deprecated credentialProviders it replaced.
type profileStatus struct {
	AccessProviders     []offered `json:"accessProviders,omitempty"`
	CredentialProviders []offered `json:"credentialProviders,omitempty"`
}

// access is how to reach one profile's cluster: the provider file's entry,
// its plugin completed by what the profile adds, and the profile's cluster.
type access struct {
	where   string // "ClusterProfile ns/name, access provider "x"": all an error says of the profile
	exec    clientcmdapi.ExecConfig
	cluster *clientcmdapi.Cluster
	digest  [sha256.Size]byte // of the provider's name and the profile's cluster data
	// federated logs in for a provider served in process (Federated), in
	// place of exec.
	federated login.Handler
}

// kubeconfig is a as a kubeconfig of one context, for kubeconf.
func (a *access) kubeconfig() *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	exec := a.exec
	exec.Args, exec.Env = slices.Clone(exec.Args), slices.Clone(exec.Env)
	exec.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
	cfg.Clusters["profile"] = a.cluster
	cfg.AuthInfos["profile"] = &clientcmdapi.AuthInfo{Exec: &exec}
	cfg.Contexts["profile"] = &clientcmdapi.Context{Cluster: "profile", AuthInfo: "profile"}
	cfg.CurrentContext = "profile"
	return cfg
}

// errNoProvider is a profile that offers no provider of the file's.
var errNoProvider = errors.New("none of its access providers is in the provider file")

// accessFor chooses how to reach the cluster of the profile obj: the first
// of providers (the file's order) that the profile offers, an
// accessProviders entry winning over a credentialProviders one of the same
// name, as the reference library chooses. Its errors name the profile, the
// provider and the field, never a value of the profile: whoever writes
// profiles chose those.
func accessFor(obj *unstructured.Unstructured, providers []AccessProvider) (*access, error) {
	profile := "ClusterProfile " + obj.GetNamespace() + "/" + obj.GetName()
	var status profileStatus
	if raw, ok := obj.Object["status"]; ok {
		b, err := json.Marshal(raw)
		if err == nil {
			err = json.Unmarshal(b, &status)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: its status does not hold access providers as the ClusterProfile API lays them out", profile)
		}
	}
	byName := map[string]offered{}
	for _, o := range status.CredentialProviders {
		byName[o.Name] = o
	}
	for _, o := range status.AccessProviders {
		byName[o.Name] = o
	}
	for _, p := range providers {
		o, ok := byName[p.Name]
		if !ok {
			continue
		}
		where := fmt.Sprintf("%s, access provider %q", profile, p.Name)
		a, err := newAccess(where, obj.GetNamespace(), p, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		return a, nil
	}
	return nil, fmt.Errorf("%s: %w (it offers %s)", profile, errNoProvider, offeredNames(byName))
}

// maxShownNames bounds the names an error lists of those a profile
// offers, and maxShownName the bytes it shows of each.
const (
	maxShownNames = 8
	maxShownName  = 63
)

func offeredNames(byName map[string]offered) string {
	names := slices.Sorted(maps.Keys(byName))
	if len(names) == 0 {
		return "none"
	}
	more := ""
	if len(names) > maxShownNames {
		names, more = names[:maxShownNames], fmt.Sprintf(" and %d more", len(names)-maxShownNames)
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		if len(n) > maxShownName {
			n = n[:maxShownName] + "…"
		}
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(quoted, ", ") + more
}

// newAccess checks the profile's cluster o and completes p's plugin with
// what o adds, as p's policies allow.
func newAccess(where, namespace string, p AccessProvider, o offered) (*access, error) {
	if err := checkServer(o.Cluster.Server); err != nil {
		return nil, err
	}
	switch {
	case o.Cluster.CertificateAuthority != "":
		return nil, errors.New("certificate-authority names a file of this machine: a profile carries its CA as certificate-authority-data")
	case o.Cluster.InsecureSkipTLSVerify:
		return nil, errors.New("insecure-skip-tls-verify is set: this process's credential would go to a server nothing verifies")
	}
	if p.Federated != nil {
		return newFederatedAccess(where, namespace, p, o)
	}
	if o.Cluster.ProxyURL != "" {
		if u, err := url.Parse(o.Cluster.ProxyURL); err != nil || u.User != nil {
			return nil, errors.New("proxy-url is not a URL without user info")
		}
	}
	exec := *p.ExecConfig
	exec.Args, exec.Env = slices.Clone(exec.Args), slices.Clone(exec.Env)
	kept := o.Cluster.Extensions[:0:0]
	for _, ext := range o.Cluster.Extensions {
		switch ext.Name {
		case ExtraArgsExtension:
			var args []string
			if err := json.Unmarshal(ext.Extension.Raw, &args); err != nil {
				return nil, fmt.Errorf("extension %s is not a list of strings", ExtraArgsExtension)
			}
			if p.ProfileSourcedCLIArgsPolicy == ArgsAppend {
				exec.Args = append(exec.Args, args...)
			}
		case ExtraEnvExtension:
			var env map[string]string
			if err := json.Unmarshal(ext.Extension.Raw, &env); err != nil {
				return nil, fmt.Errorf("extension %s is not a map of strings", ExtraEnvExtension)
			}
			exec.Env = mergeEnv(exec.Env, env, p.ProfileSourcedEnvVarsPolicy)
		default:
			kept = append(kept, ext)
		}
	}
	if err := overridden(*p.ExecConfig, exec.Args[len(p.ExecConfig.Args):], exec.Env); err != nil {
		return nil, err
	}
	digest := sha256.New()
	_ = json.NewEncoder(digest).Encode(offered{Name: p.Name, Cluster: o.Cluster})
	cluster := o.Cluster
	cluster.Extensions = kept
	internal := clientcmdapi.NewCluster()
	if err := clientcmdlatest.Scheme.Convert(&cluster, internal, nil); err != nil {
		return nil, errors.New("its cluster data does not convert to a kubeconfig cluster")
	}
	a := &access{where: where, exec: exec, cluster: internal}
	copy(a.digest[:], digest.Sum(nil))
	return a, nil
}

// checkServer refuses a server that is not https://host, or that carries
// user info; it quotes none of it.
func checkServer(server string) error {
	u, err := url.Parse(server)
	switch {
	case server == "":
		return errors.New("the cluster has no server")
	case err != nil || u.Scheme != "https" || u.Host == "":
		return errors.New("the cluster's server is not an https:// URL")
	case u.User != nil:
		return errors.New("the cluster's server carries user info")
	}
	return nil
}

// mergeEnv adds the profile's env to the plugin's: the plugin's values win
// under AppendIfNotExists, the profile's under Replace; Ignore (or no
// policy) adds nothing. The plugin's variables keep their order, the
// profile's new ones follow by name.
func mergeEnv(own []clientcmdapi.ExecEnvVar, extra map[string]string, policy string) []clientcmdapi.ExecEnvVar {
	if policy != EnvAppendIfNotExists && policy != EnvReplace {
		return own
	}
	for i, e := range own {
		if v, ok := extra[e.Name]; ok {
			if policy == EnvReplace {
				own[i].Value = v
			}
			delete(extra, e.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		own = append(own, clientcmdapi.ExecEnvVar{Name: name, Value: extra[name]})
	}
	return own
}
