package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync"

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
// the audiences stay: it remembers the key of the last token the cloud
// took, to tell a cloud that does not trust the hub's new key yet.
type fluxCloud struct {
	member   fluxMember
	opts     FluxOptions
	provider FluxProvider
	client   kubernetes.Interface

	mu        sync.Mutex // guards the rest
	audiences []string
	handler   login.Handler
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
	return c.federated(audiences)(context.WithValue(ctx, exchangeKey{}, provider))
}

// federated is the federation handler for audiences: the one kept, or a
// new one when they changed.
func (c *fluxCloud) federated(audiences []string) login.Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handler == nil || !slices.Equal(c.audiences, audiences) {
		cfg := c.member.config(c.opts)
		cfg.Audiences = audiences
		cfg.Provider = federation.ProviderFunc(exchange)
		c.audiences, c.handler = slices.Clone(audiences), federation.Login(cfg)
	}
	return c.handler
}

// exchange is the provider in the login's context.
func exchange(ctx context.Context, token federation.Token, member federation.Member) (*login.ConnectionInfo, error) {
	return ctx.Value(exchangeKey{}).(federation.Provider).Credential(ctx, token, member)
}
