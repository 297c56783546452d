package fleet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
)

// fluxCloud is the login of a ConfigMap whose provider is a cloud's: at
// each login it reads the ServiceAccount, asks the FluxProvider for the
// exchange (and, when the ConfigMap names none, the audiences) it says,
// and logs in with federation.Login. The federation handler is kept while
// the audiences and the ServiceAccount (its UID and annotations: the cloud
// identity) stay: it remembers the key of the last token the cloud took,
// to tell a cloud that does not trust the hub's new key yet, which says
// nothing of another identity.
type fluxCloud struct {
	member   fluxMember
	opts     FluxOptions
	provider FluxProvider
	client   kubernetes.Interface

	mu      sync.Mutex // guards the rest
	kept    string     // what the handler was made for (identity)
	handler login.Handler
}

// exchangeKey carries a login's provider to the federation handler,
// whose Config holds one for every login.
type exchangeKey struct{}

func (c *fluxCloud) login(ctx context.Context) (*login.ConnectionInfo, error) {
	m := c.member
	// Bounded as federation.Login bounds its mint and exchange: a hub or
	// provider that never answers does not hold the login, whatever
	// timeout FluxOptions.Login registers it with.
	before, cancel := context.WithTimeout(ctx, fluxTimeout)
	defer cancel()
	sa, err := c.client.CoreV1().ServiceAccounts(m.namespace).Get(before, m.serviceAccount, metav1.GetOptions{})
	switch {
	// As with TokenRequest: a retry within the login reads the same, so
	// the callers get the reason now, and the vault's backoff spaces the
	// next logins.
	case apierrors.IsNotFound(err):
		return nil, login.Permanent(fmt.Errorf("fleet: Flux ConfigMap %s: its ServiceAccount %s/%s does not exist: %w", m.configMap, m.namespace, m.serviceAccount, err))
	case apierrors.IsForbidden(err):
		return nil, login.Permanent(fmt.Errorf("fleet: Flux ConfigMap %s: its ServiceAccount %s/%s: provider %q reads its annotations, and this identity lacks get on serviceaccounts in namespace %s (RBAC, or see the server's answer): %w", m.configMap, m.namespace, m.serviceAccount, m.provider, m.namespace, err))
	case err != nil:
		return nil, fmt.Errorf("fleet: Flux ConfigMap %s: its ServiceAccount %s/%s: %w", m.configMap, m.namespace, m.serviceAccount, err)
	}
	audiences := m.audiences
	if len(audiences) == 0 {
		if audiences, err = c.provider.Audiences(sa); err != nil {
			return nil, login.Permanent(fmt.Errorf("fleet: Flux ConfigMap %s names no audiences, and provider %q has none for ServiceAccount %s/%s: %w", m.configMap, m.provider, m.namespace, m.serviceAccount, err))
		}
	}
	provider, err := c.provider.New(before, FluxCluster{ConfigMap: m.configMap, Cluster: m.cluster, Member: federation.Member{Server: m.address, CAData: m.ca}, ServiceAccount: sa})
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("fleet: provider %q for Flux ConfigMap %s: %w", m.provider, m.configMap, err))
	}
	return c.federated(audiences, sa)(context.WithValue(ctx, exchangeKey{}, provider))
}

// federated is the federation handler for audiences and sa: the one kept,
// or a new one when either changed.
func (c *fluxCloud) federated(audiences []string, sa *corev1.ServiceAccount) login.Handler {
	want := identity(audiences, sa)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handler == nil || c.kept != want {
		cfg := c.member.config(c.opts)
		cfg.Audiences = slices.Clone(audiences)
		cfg.Provider = federation.ProviderFunc(exchange)
		c.kept, c.handler = want, federation.Login(cfg)
	}
	return c.handler
}

// identity is what a federation handler of audiences for sa is made for:
// the audiences, and the ServiceAccount's UID and annotations, from which
// a FluxProvider reads the cloud identity.
func identity(audiences []string, sa *corev1.ServiceAccount) string {
	parts := []string{strings.Join(audiences, "\n"), string(sa.UID)}
	for _, k := range slices.Sorted(maps.Keys(sa.Annotations)) {
		parts = append(parts, k+"="+sa.Annotations[k])
	}
	return strings.Join(parts, "\x00")
}

// exchange is the provider in the login's context.
func exchange(ctx context.Context, token federation.Token, member federation.Member) (*login.ConnectionInfo, error) {
	return ctx.Value(exchangeKey{}).(federation.Provider).Credential(ctx, token, member)
}
