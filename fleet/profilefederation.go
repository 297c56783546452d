package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
)

// FederatedAccess serves a ClusterProfile access provider in process
// (AccessProvider.Federated), or a Cluster API kubeconfig Secret's cluster
// (SecretsOptions.Federated), with no stored credential: each login mints
// a token on the hub for the ServiceAccount of that name in the object's
// own namespace (a profile's inventory namespace, a Secret's, is its
// tenant's), with the member's audiences, and gives it to Provider with
// the object's server and CA (federation.Login). The object chooses the
// server, as for any provider, but no proxy: one with a proxy-url is
// refused, so that the token goes to the server alone; so is one whose
// CA is no PEM, or whose audience would be the hub's own.
type FederatedAccess struct {
	// Config is the hub's (required): the tokens are minted through it.
	// Its identity needs create on serviceaccounts/token in the profiles'
	// (or Secrets') namespaces.
	Config *rest.Config
	// ServiceAccount is the name of the ServiceAccount, in each profile's
	// own namespace, whose tokens are minted (required).
	ServiceAccount string
	// Audiences the tokens are minted for. Default: the cluster's server
	// (the profile's, the kubeconfig's), as Flux's generic provider does.
	Audiences []string
	// Lifetime of each token. Default: federation.Config's, an hour.
	Lifetime time.Duration
	// Provider turns a token into the member's credential. Default:
	// federation.Generic, the token as it is.
	Provider federation.Provider
}

func (fa *FederatedAccess) check() error {
	switch {
	case fa.Config == nil:
		return errors.New("Federated.Config is required: the hub that mints the tokens")
	case len(validation.IsDNS1123Subdomain(fa.ServiceAccount)) > 0:
		return fmt.Errorf("Federated.ServiceAccount %q is not the name of a ServiceAccount (one of the profile's own namespace)", fa.ServiceAccount)
	case slices.Contains(fa.Audiences, ""):
		return errors.New("Federated.Audiences holds an empty audience")
	}
	return nil
}

// newFederatedAccess is newAccess for a provider served in process.
func newFederatedAccess(where, namespace string, p AccessProvider, o offered) (*access, error) {
	switch {
	case o.Cluster.ProxyURL != "":
		return nil, errors.New("proxy-url is set: a token minted for the member goes to its server alone")
	case o.Cluster.TLSServerName != "" && len(validation.IsDNS1123Subdomain(o.Cluster.TLSServerName)) > 0:
		return nil, errors.New("tls-server-name is not a DNS name")
	case strings.ContainsAny(o.Cluster.Server, "?#"):
		return nil, errors.New("the cluster's server holds a query or a fragment")
	}
	cfg := p.Federated.config(namespace, login.ConnectionInfo{Server: o.Cluster.Server, CAData: o.Cluster.CertificateAuthorityData, TLSServerName: o.Cluster.TLSServerName})
	// What the login would refuse at its first try (a CA that is no PEM,
	// an audience of the hub's own) is refused now, by the profile's
	// name, and a served profile that changes to it keeps what served.
	// The server is checked above: these errors quote none of the
	// profile's values.
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	digest := sha256.New()
	_ = json.NewEncoder(digest).Encode(offered{Name: p.Name, Cluster: o.Cluster})
	a := &access{where: where, federated: federation.Login(cfg)}
	copy(a.digest[:], digest.Sum(nil))
	return a, nil
}

// forCluster logs in to the cluster a kubeconfig names (its server and CA
// alone) with tokens of the ServiceAccount of fa's name in namespace. The
// federation login, which keeps what it learnt of the member's keys, is
// made again only when the cluster changes.
func (fa *FederatedAccess) forCluster(namespace string) func(context.Context, login.ConnectionInfo) (*login.ConnectionInfo, error) {
	var (
		mu   sync.Mutex // guards last and fed
		last string
		fed  login.Handler
	)
	return func(ctx context.Context, cluster login.ConnectionInfo) (*login.ConnectionInfo, error) {
		key := cluster.Server + "\x00" + string(cluster.CAData) + "\x00" + cluster.TLSServerName
		mu.Lock()
		if fed == nil || key != last {
			fed = federation.Login(fa.config(namespace, cluster))
			last = key
		}
		h := fed
		mu.Unlock()
		return h(ctx)
	}
}

// config is the federation config of the cluster's login, with tokens of
// the ServiceAccount of fa's name in namespace.
func (fa *FederatedAccess) config(namespace string, cluster login.ConnectionInfo) federation.Config {
	audiences := slices.Clone(fa.Audiences)
	if len(audiences) == 0 {
		audiences = []string{cluster.Server}
	}
	return federation.Config{
		Hub: fa.Config, Namespace: namespace, ServiceAccount: fa.ServiceAccount,
		Audiences: audiences, Lifetime: fa.Lifetime, Provider: fa.Provider,
		Member: federation.Member{Server: cluster.Server, CAData: slices.Clone(cluster.CAData), TLSServerName: cluster.TLSServerName},
	}
}
