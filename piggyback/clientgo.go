package piggyback

import (
	"context"
	"flag"
	"os"
	"os/user"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"

	"github.com/authvault/authvault/login"
)

// KubeconfigFlag is the name of the command-line flag that names a
// kubeconfig, as controller-runtime registers it.
const KubeconfigFlag = "kubeconfig"

// ClientGo logs in with the configuration controller-runtime's
// config.GetConfig would find, in its order: the --kubeconfig flag when some
// package registered it, else $KUBECONFIG, else the in-cluster
// ServiceAccount when $KUBECONFIG is not set, else ~/.kube/config. Without
// any of these it returns (nil, nil).
//
// It reads the flag through flag.Lookup and registers none: importing
// authvault never defines a flag.
func ClientGo(ctx context.Context) (*login.ConnectionInfo, error) {
	if path := kubeconfigFlagValue(); path != "" {
		return KubeconfigFrom(KubeconfigOptions{Path: path})(ctx)
	}
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if info, err := ServiceAccount(ctx); info != nil || err != nil {
			return info, err
		}
	}
	rules := defaultRules()
	if _, ok := os.LookupEnv("HOME"); !ok {
		// As controller-runtime does: the user's home from the system.
		if u, err := user.Current(); err == nil {
			rules.Precedence = append(rules.Precedence, filepath.Join(u.HomeDir, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName))
		}
	}
	return redacted(fromKubeconfig(ctx, rules, ""))
}

// defaultRules are client-go's default loading rules, with the home
// kubeconfig found now rather than when client-go was initialised.
func defaultRules() *clientcmd.ClientConfigLoadingRules {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		rules.Precedence = []string{homeKubeconfig()}
	}
	return rules
}

// kubeconfigFlagValue is the --kubeconfig flag's value, or "".
func kubeconfigFlagValue() string {
	if f := flag.Lookup(KubeconfigFlag); f != nil {
		return f.Value.String()
	}
	return ""
}

// homeKubeconfig is ~/.kube/config, computed when asked: HOME may change.
func homeKubeconfig() string {
	return filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
}
