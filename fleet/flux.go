package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// The keys of a Flux ConfigMap (fluxcd/pkg/apis/meta's KubeConfigKey*):
// what a Kustomization's spec.kubeConfig.configMapRef names.
const (
	fluxProvider       = "provider"
	fluxCluster        = "cluster"
	fluxAddress        = "address"
	fluxCACert         = "ca.crt"
	fluxAudiences      = "audiences"
	fluxServiceAccount = "serviceAccountName"
)

// FluxOptions choose the Flux ConfigMaps of a hub cluster that make up a
// fleet with no stored credential, and how their tokens are minted.
type FluxOptions struct {
	// Config is the hub's (required): the ConfigMaps are watched with it,
	// and the tokens minted through it (TokenRequest). Its identity needs
	// list and watch on configmaps in Namespace, create on
	// serviceaccounts/token in each watched namespace (or only for the
	// ServiceAccounts the ConfigMaps may name, by resourceNames), and get
	// on serviceaccounts for a provider other than generic. A manager's
	// mgr.GetConfig(), or a vault's RESTConfig.
	Config *rest.Config
	// Namespace is where the ConfigMaps are. Default: every namespace.
	// Whoever may write a ConfigMap of a namespace chooses where the
	// tokens of that namespace's ServiceAccounts go: name the namespaces
	// whose writers you trust with them.
	Namespace string
	// LabelSelector chooses the ConfigMaps, in the syntax of
	// metav1.ListOptions. Default: all; a ConfigMap without the provider
	// key is no cluster's, and is skipped.
	LabelSelector string
	// ServiceAccount is the ServiceAccount, in the ConfigMap's own
	// namespace, whose tokens a ConfigMap that names none gets (Flux's
	// default service account of its multi-tenancy lockdown). Default:
	// none: such a ConfigMap gets the operator's own ServiceAccount's
	// tokens (Operator) if it is in the operator's namespace, and is
	// refused elsewhere.
	ServiceAccount string
	// Operator is the operator's own ServiceAccount, "namespace/name".
	// Default: the pod's, read from its token
	// (/var/run/secrets/kubernetes.io/serviceaccount/token); out of a pod
	// none, and a ConfigMap that names no ServiceAccount is refused unless
	// ServiceAccount gives a default.
	Operator string
	// Providers serve the ConfigMaps whose provider key is not generic,
	// by that key ("aws", "gcp", "azure"): the cloud modules' Flux
	// functions, eks.Flux, gke.Flux and aks.Flux. A ConfigMap whose
	// provider has none here is refused.
	Providers map[string]FluxProvider
	// Lifetime of each token. Default: federation.Config's, an hour.
	Lifetime time.Duration
	// Login are the options of every cluster's login handler, as for
	// vault.OnLogin. Default: login's defaults, with a timeout of 30 s.
	Login []login.Option
	// EveryReplica makes FluxWatcher run on every replica of a manager,
	// not on the leader only (see SecretsWatcher). Default: false, the
	// leader only, but for a fleet with Options.Shards.
	EveryReplica bool
}

// FluxCluster is what a Flux ConfigMap says of a member, for a
// FluxProvider.
type FluxCluster struct {
	// ConfigMap is the ConfigMap's "namespace/name".
	ConfigMap string
	// Cluster is the member's resource name at its cloud (the cluster
	// key: an EKS cluster's ARN, a GKE cluster's or AKS cluster's
	// resource name), when the ConfigMap has one.
	Cluster string
	// Member is where the credential goes: the address and ca.crt keys.
	Member federation.Member
	// ServiceAccount is the hub's ServiceAccount whose tokens are minted,
	// as the hub has it (its annotations name cloud identities).
	ServiceAccount *corev1.ServiceAccount
}

// FluxProvider serves the Flux ConfigMaps of one provider key other
// than generic: a cloud module's Flux function makes one.
type FluxProvider struct {
	// Audiences says the audiences the tokens are minted for when a
	// ConfigMap's audiences key names none (required): those the cloud's
	// STS takes for sa, the ServiceAccount as the hub has it at the login
	// (GCP's, for one, is the workload identity provider its annotation
	// names). An error is the login's, and names what sa lacks.
	Audiences func(sa *corev1.ServiceAccount) ([]string, error)
	// New makes the provider that exchanges a token for c's member
	// (required). It is called at every login, before the token is
	// minted, with the ServiceAccount as the hub has it then: a change of
	// its annotations needs no change of the ConfigMap. An error is the
	// login's: a ServiceAccount that names no cloud identity, a cluster
	// key the cloud needs and the ConfigMap lacks. ctx bounds New alone:
	// the provider's Credential gets a context of its own.
	New func(ctx context.Context, c FluxCluster) (federation.Provider, error)
}

// fluxMember is what the watch reads of a ConfigMap: the keys above.
type fluxMember struct {
	configMap                  string
	provider, cluster, address string
	ca                         []byte
	audiences                  []string
	namespace, serviceAccount  string
}

// errNotFlux marks a ConfigMap that is no Flux cluster's: no provider key.
var errNotFlux = errors.New("no provider key: not a Flux cluster's ConfigMap")

// readFluxConfigMap reads cm's keys, and refuses what cannot serve: an
// unknown provider, an address that is no https URL, a ServiceAccount of
// another namespace, a ConfigMap with none outside the operator's
// namespace, and what federation.Login would refuse at the first login (a
// ca.crt that is no PEM, an audience of the hub's own). Its errors name
// the ConfigMap and quote its values short. opts has its defaults.
func readFluxConfigMap(cm *corev1.ConfigMap, opts FluxOptions) (fluxMember, error) {
	name := cm.Namespace + "/" + cm.Name
	m, err := readFluxData(cm, opts)
	if err != nil && err != errNotFlux {
		return fluxMember{}, fmt.Errorf("fleet: Flux ConfigMap %s: %w", name, err)
	}
	return m, err
}

func readFluxData(cm *corev1.ConfigMap, opts FluxOptions) (fluxMember, error) {
	provider, ok := cm.Data[fluxProvider]
	if !ok {
		return fluxMember{}, errNotFlux
	}
	m := fluxMember{configMap: cm.Namespace + "/" + cm.Name, provider: provider, cluster: cm.Data[fluxCluster], address: cm.Data[fluxAddress], namespace: cm.Namespace}
	if ca, ok := cm.Data[fluxCACert]; ok {
		m.ca = []byte(ca)
	}
	for aud := range strings.SplitSeq(cm.Data[fluxAudiences], "\n") {
		switch aud = strings.TrimSpace(aud); {
		case aud == "" || slices.Contains(m.audiences, aud):
		case len(m.audiences) == maxFluxAudiences:
			return fluxMember{}, fmt.Errorf("the audiences key names more than %d audiences", maxFluxAudiences)
		case len(aud) > maxFluxAudience:
			return fluxMember{}, fmt.Errorf("the audience %q is longer than %d bytes", short(aud), maxFluxAudience)
		default:
			m.audiences = append(m.audiences, aud)
		}
	}
	switch {
	case provider == "generic":
	case provider == "":
		return fluxMember{}, errors.New("the provider key is empty: want generic, aws, gcp or azure")
	case opts.Providers[provider].New == nil:
		return fluxMember{}, fmt.Errorf("provider %q has no FluxOptions.Providers entry (generic needs none; the cloud modules' Flux functions serve aws, gcp and azure)", short(provider))
	}
	// Flux may look a cloud member's address up by its cluster key; here
	// the ConfigMap names it, for every provider, so that the token's
	// destination is the one the ConfigMap's writer chose and no other.
	if m.address == "" {
		return fluxMember{}, errors.New("no address key: the member's API server is required")
	}
	if u, err := url.Parse(m.address); err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return fluxMember{}, fmt.Errorf("address %s is not an https URL with a host and no user info", short(redact.Value(m.address)))
	}
	if len(m.audiences) == 0 && provider == "generic" {
		m.audiences = []string{m.address} // Flux's default for generic
	}
	name, named := cm.Data[fluxServiceAccount]
	switch {
	case named && len(validation.IsDNS1123Subdomain(name)) > 0:
		return fluxMember{}, fmt.Errorf("serviceAccountName %q is not the name of a ServiceAccount: a ConfigMap names one of its own namespace %q, never another's", short(name), cm.Namespace)
	case named:
		m.serviceAccount = name
	case opts.ServiceAccount != "":
		m.serviceAccount = opts.ServiceAccount
	case opts.Operator == "":
		return fluxMember{}, errors.New("no serviceAccountName, and no default: FluxOptions.ServiceAccount names none, and FluxOptions.Operator is empty (this process runs in no pod, or its token names no ServiceAccount)")
	default:
		ns, own, _ := strings.Cut(opts.Operator, "/")
		if ns != cm.Namespace {
			return fluxMember{}, fmt.Errorf("no serviceAccountName: the operator's own ServiceAccount %s serves only the ConfigMaps of its namespace, and FluxOptions.ServiceAccount names no default for the others", opts.Operator)
		}
		m.serviceAccount = own
	}
	// What the login would refuse at its first try is refused here, by
	// the ConfigMap's name, and a served ConfigMap that changes to it
	// keeps what served. A cloud's audiences may come of the
	// ServiceAccount at the login, and are checked then.
	cfg := m.config(opts)
	if len(cfg.Audiences) == 0 {
		cfg.Audiences = []string{"the cloud's"}
	}
	if err := cfg.Check(); err != nil {
		return fluxMember{}, err
	}
	return m, nil
}

// The bounds of a ConfigMap's audiences: a token names each, and is sent
// in a header, which an API server takes up to a megabyte of.
const (
	maxFluxAudiences = 32
	maxFluxAudience  = 1024
)

// maxShownValue bounds the bytes an error quotes of a ConfigMap's value.
const maxShownValue = 63

// short is s, cut to maxShownValue bytes.
func short(s string) string {
	if len(s) <= maxShownValue {
		return s
	}
	return strings.ToValidUTF8(s[:maxShownValue], "") + "…"
}

// config is m's federation config, with no provider.
func (m fluxMember) config(opts FluxOptions) federation.Config {
	return federation.Config{
		Hub: opts.Config, Namespace: m.namespace, ServiceAccount: m.serviceAccount,
		Audiences: m.audiences, Lifetime: opts.Lifetime,
		Member: federation.Member{Server: m.address, CAData: m.ca},
	}
}

// key is what decides m's credential, to tell a change that needs a new
// login from one that does not.
func (m fluxMember) key() string {
	return strings.Join([]string{m.provider, m.cluster, m.address, string(m.ca), strings.Join(m.audiences, "\n"), m.serviceAccount}, "\x00")
}

// handler is m's login: federation.Login, with the provider m names.
func (m fluxMember) handler(opts FluxOptions, client kubernetes.Interface) login.Handler {
	if m.provider == "generic" {
		return federation.Login(m.config(opts))
	}
	c := &fluxCloud{member: m, opts: opts, provider: opts.Providers[m.provider], client: client}
	return login.Named(fmt.Sprintf("federated %s/%s for %s", m.namespace, m.serviceAccount, m.provider), "federated", c.login)
}

// ownServiceAccount is the pod's ServiceAccount, "namespace/name", from
// the sub of its token; "" out of a pod.
func ownServiceAccount() string {
	raw, err := os.ReadFile(podTokenFile)
	if err != nil {
		return ""
	}
	tok, err := jwt.ParseSigned(strings.TrimSpace(string(raw)), []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.PS256, jose.RS384, jose.RS512, jose.ES384, jose.ES512})
	if err != nil {
		return ""
	}
	var claims jwt.Claims
	if tok.UnsafeClaimsWithoutVerification(&claims) != nil {
		return ""
	}
	parts := strings.Split(claims.Subject, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return ""
	}
	return parts[2] + "/" + parts[3]
}

// podTokenFile is where a pod's ServiceAccount token is mounted.
var podTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
