package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/vault"
)

// Member is one cluster of the fleet, as OnAdd and OnRemove see it: its
// name, its vault, and the one config handed out for it. Its methods are
// safe for concurrent use, and keep to this cluster: once it has left the
// fleet they never reach a cluster of the same name added after it, as a
// lookup by name would.
type Member struct {
	// Set by newMember, never changed.
	name  string
	vault *vault.Vault
	reg   *registerer     // nil without Options.Registerer
	ctx   context.Context // the one OnAdd gets: ends when the member leaves the fleet
	leave context.CancelCauseFunc
	gen   uint64 // with Options.Shards, the number the shards gave it: set before OnAdd, never changed

	hooks   sync.Mutex // guards added and retired
	added   bool       // OnAdd has had the member
	retired bool       // the member has left: no OnAdd from now on

	mu  sync.Mutex // guards cfg
	cfg *rest.Config
}

func newMember(name string, v *vault.Vault, reg *registerer, log logr.Logger) *Member {
	// A context of its own, not one of the caller of Add: the member lives
	// until it leaves the fleet, whoever added it.
	ctx, leave := context.WithCancelCause(logr.NewContext(context.Background(), log))
	return &Member{name: name, vault: v, reg: reg, ctx: ctx, leave: leave}
}

// leftError is the cause of a member's leaving, but for Close: it says why,
// and it is an ErrUnknownCluster.
type leftError struct{ name, reason string }

func (e *leftError) Error() string {
	return fmt.Sprintf("fleet: cluster %q has left the fleet: %s", e.name, e.reason)
}
func (e *leftError) Unwrap() error { return ErrUnknownCluster }

// Name is the cluster's name in the fleet: the one given to Add, or
// "<namespace>/<cluster>" for a cluster from a Secret.
func (m *Member) Name() string { return m.name }

// Vault returns the cluster's vault: to Refresh it, check it with Ready, or
// Select a credential. It is closed once the cluster has left the fleet.
func (m *Member) Vault() *vault.Vault { return m.vault }

// RESTConfig returns the cluster's client-go config, waiting within ctx for
// its first credential (see vault.Vault.RESTConfig); a first login that
// gives none returns its error (a LoginError naming the cluster), not a
// config on vault.PendingServer as the vault's does. A cluster's vault logs
// in when its config is first asked for, so call it from what OnAdd starts,
// not from OnAdd. Every call returns the same *rest.Config for as long as
// the cluster is in the fleet: its credentials rotate underneath it, so
// clients, informers and caches built on it are never rebuilt; exec, attach
// and port-forward streams built on it use the cluster's current credential
// too. It is shared: copy it with rest.CopyConfig before changing it.
//
// Once the cluster has left the fleet, or this replica (Options.Shards),
// or when it leaves while RESTConfig waits, RESTConfig returns why (the
// cause of OnAdd's context): an error that wraps ErrUnknownCluster,
// ErrClosed, or ErrNotOwned when the cluster moved to another replica or
// this one lost its Lease.
func (m *Member) RESTConfig(ctx context.Context) (*rest.Config, error) {
	if m.ctx.Err() != nil {
		return nil, context.Cause(m.ctx)
	}
	m.mu.Lock()
	cfg := m.cfg
	m.mu.Unlock()
	if cfg != nil {
		return cfg, nil
	}
	// Not a moment past the member's leaving: OnRemove may be waiting for
	// this caller to give up before the vault closes.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(m.ctx, func() { cancel(context.Cause(m.ctx)) })()
	// Select first: a cluster whose first login fails gets its error here
	// (its OnAdd decides what to do with it), where the vault's RESTConfig
	// would give a config that waits for a login (vault.PendingServer).
	_, err := m.vault.Select(ctx)
	if err == nil {
		cfg, err = m.vault.RESTConfig(ctx)
	}
	if err == nil && cfg.Host == vault.PendingServer {
		// Its credential went between the two, and the login after it
		// failed: that login's error, never a config to keep.
		if _, err = m.vault.Select(ctx); err == nil {
			err = errors.New("its credential was invalidated while its config was made: ask again")
		}
		cfg = nil
	}
	if m.ctx.Err() != nil {
		return nil, context.Cause(m.ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: cluster %q: %w", m.name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg == nil { // the first caller's config is every caller's
		m.cfg = cfg
	}
	return m.cfg, nil
}
