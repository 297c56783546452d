package piggyback

import (
	"context"
	"flag"
	"os"
	"os/user"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// KubeconfigFlag is the name of the command-line flag that names a
// kubeconfig, as controller-runtime registers it.
const KubeconfigFlag = "kubeconfig"

// ClientGo logs in with the configuration controller-runtime's
// config.GetConfig would find, in its order: the --kubeconfig flag when some
// package registered it, else $KUBECONFIG, else the in-cluster
// ServiceAccount when $KUBECONFIG is not set, else ~/.kube/config. Without
// HOME, ~/.kube/config is the user's home from the system, read also beneath
// $KUBECONFIG's files, as config.GetConfig does. Without any of these it
// returns (nil, nil).
//
// It reads the flag through flag.Lookup and registers none: importing
// authvault never defines a flag. It is named "client-go config"; its
// metric label is "client-go".
func ClientGo(ctx context.Context) (*login.ConnectionInfo, error) {
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	if env != "" && kubeconfigFlagValue() == "" {
		// As config.GetConfig: with $KUBECONFIG set, its files decide, and
		// without HOME the user's ~/.kube/config from the system is merged
		// beneath them.
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)}
		if _, ok := os.LookupEnv("HOME"); !ok {
			rules.Precedence = append(rules.Precedence, homeKubeconfig())
		}
		return redacted(fromKubeconfig(ctx, rules, "", handlers.PluginPolicy{}))
	}
	for _, src := range sources() {
		if info, err := orNil(src.handler(ctx)); info != nil || err != nil {
			return info, err
		}
	}
	return nil, nil
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

// currentUser looks the user up in the system; tests replace it.
var currentUser = user.Current

// homeKubeconfig is ~/.kube/config, computed when asked: HOME may change.
// Without HOME, the user's home comes from the system, as
// controller-runtime finds it.
func homeKubeconfig() string {
	home := homedir.HomeDir()
	if _, ok := os.LookupEnv("HOME"); !ok {
		if u, err := currentUser(); err == nil {
			home = u.HomeDir
		}
	}
	return filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
}
