package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// Errors callers can act on, matched with errors.Is.
var (
	// ErrClosed is returned by a closed fleet.
	ErrClosed = errors.New("fleet: the fleet is closed")
	// ErrUnknownCluster means no cluster of that name is in the fleet.
	ErrUnknownCluster = errors.New("fleet: no such cluster")
	// ErrExists means a cluster of that name is in the fleet already.
	ErrExists = errors.New("fleet: a cluster of that name is in the fleet already")
)

// Options configure a Fleet. The zero value is valid.
type Options struct {
	// Logger receives every cluster's vault events, each with the key
	// "cluster". Default: the zero logr.Logger, which discards.
	Logger logr.Logger
	// Registerer receives every cluster's vault metrics (authvault_*),
	// each with the label cluster="<name>", unregistered when the cluster
	// leaves the fleet. A vault of your own on the same registerer (the
	// hub's, controller-runtime's metrics.Registry) registers beside them,
	// its series labelled cluster="" (or as you wrap its registerer:
	// prometheus.WrapRegistererWith(prometheus.Labels{"cluster": "hub"},
	// reg)). Default: nil, which registers nothing.
	Registerer prometheus.Registerer
	// Vault configures every cluster's vault. Its Logger and Registerer
	// are replaced by the fleet's, and its fallback is always off: a
	// remote cluster never gets this process's own kubeconfig or
	// ServiceAccount.
	Vault vault.Options
	// OnAdd is called once a cluster is in the fleet (by Add, a Secret or
	// a ClusterProfile), with the cluster and a context that ends when the
	// cluster leaves the fleet (Remove, its Secret or profile gone,
	// Close): start what runs against the cluster there (a
	// cluster.Cluster and its controllers) on that context, and it stops
	// when it should. m.RESTConfig waits for the cluster's first login (a
	// config names the cluster's server, known once its handler has logged
	// in: a kubeconfig Secret is read at login, not when it is seen), so
	// call it from what you start, not from OnAdd: OnAdd must not wait for
	// long, since WatchSecrets and WatchClusterProfiles call it from their
	// event handlers, one cluster after another. ctx carries the fleet's
	// Logger with the cluster's name (logr.FromContext), and
	// context.Cause(ctx) says why it ended. It runs on the goroutine that
	// added the cluster, without the fleet's lock. Default: none.
	//
	// Mind when upgrading: OnAdd and OnRemove took the cluster's name
	// only (func(name string)); m.Name() is that name, m.RESTConfig(ctx)
	// what f.RESTConfig(ctx, name) gave, without the var f *Fleet
	// declared before New to reach it, and with no chance of reaching a
	// namesake added after this cluster left.
	OnAdd func(ctx context.Context, m *Member)
	// OnRemove is called when a cluster leaves the fleet: after the
	// context OnAdd got has ended, before the cluster's vault closes. It
	// is there to wait (briefly) for what OnAdd started to stop; with
	// OnAdd's context, most programs need no OnRemove. It runs on the
	// goroutine that removed the cluster (Close removes them
	// concurrently), without the fleet's lock. OnRemove of a cluster
	// returns before OnAdd of a cluster of the same name added later by
	// the same goroutine or watch. Like OnAdd, it must not wait for
	// long. Default: none.
	OnRemove func(m *Member)
}

// Fleet holds one vault per cluster. All its methods are safe for concurrent
// use.
type Fleet struct {
	opts Options

	mu       sync.Mutex // guards clusters and closed
	clusters map[string]*Member
	closed   bool
}

// New returns an empty fleet.
func New(opts Options) *Fleet {
	return &Fleet{opts: opts, clusters: map[string]*Member{}}
}

// Add puts a cluster in the fleet, whose credentials come from h (with
// opts, as for vault.OnLogin): handlers.KubeconfigSecret for a kubeconfig
// kept in a Secret, or any login.Handler. Its vault logs in when the
// cluster's config is first used. It returns ErrExists when name is taken
// (Remove it first) and ErrClosed after Close.
func (f *Fleet) Add(name string, h login.Handler, opts ...login.Option) error {
	if name == "" || h == nil {
		return errors.New("fleet: Add needs a name and a handler")
	}
	c, err := f.add(name, addSource, h, opts)
	if err != nil {
		return err
	}
	f.joined(c, "", "")
	return nil
}

// addSource is the source of the clusters added by Add, in the log.
const addSource = "Fleet.Add"

// joined logs that m has joined the fleet, and tells OnAdd. When m takes
// the place of a member of its name that has just left, previous is that
// member's source and change why: one line says that the cluster's source
// changed.
func (f *Fleet) joined(m *Member, previous, change string) {
	if previous == "" {
		f.opts.Logger.Info("cluster joined the fleet", "cluster", m.name, "source", m.sourced())
	} else {
		f.opts.Logger.Info("cluster's source changed", "cluster", m.name, "source", m.sourced(), "previous", previous, "change", change)
	}
	if f.opts.OnAdd != nil {
		f.opts.OnAdd(m.ctx, m)
	}
}

// left logs that m has left the fleet, and why.
func (f *Fleet) left(m *Member, reason string) {
	f.opts.Logger.Info("cluster left the fleet", "cluster", m.name, "source", m.sourced(), "reason", reason)
}

// add puts a cluster, served by source (for the log), in the fleet.
func (f *Fleet) add(name, source string, h login.Handler, opts []login.Option) (*Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	if _, ok := f.clusters[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrExists, name)
	}
	vopts := f.opts.Vault
	log := f.opts.Logger.WithValues("cluster", name)
	// The vault uses its logger as given: its lines keep the name they had
	// when the vault named itself.
	vopts.Logger = log.WithName("authvault")
	vopts.Registerer = nil
	var reg *registerer
	if f.opts.Registerer != nil {
		reg = &registerer{reg: prometheus.WrapRegistererWith(prometheus.Labels{"cluster": name}, f.opts.Registerer)}
		vopts.Registerer = reg
	}
	vopts.Fallback, vopts.NoFallback = nil, true
	m := newMember(name, source, vault.New(vopts), reg, log)
	m.vault.OnLogin(h, opts...)
	f.clusters[name] = m
	return m, nil
}

// RESTConfig returns the client-go config of the named cluster, waiting
// within ctx for its first credential: see Member.RESTConfig.
func (f *Fleet) RESTConfig(ctx context.Context, name string) (*rest.Config, error) {
	m, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	return m.RESTConfig(ctx)
}

// Vault returns the named cluster's vault, or nil when it is not in the
// fleet: to Refresh it, check it with Ready, or Select a credential.
func (f *Fleet) Vault(name string) *vault.Vault {
	m, err := f.lookup(name)
	if err != nil {
		return nil
	}
	return m.vault
}

// Names returns the names of the clusters in the fleet, sorted.
func (f *Fleet) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.clusters))
	for name := range f.clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Remove takes the named cluster out of the fleet and closes its vault:
// the context OnAdd got ends, its logins stop, its connections close (once
// the requests on them end), its metrics are unregistered, and requests
// through its config fail with vault.ErrClosed. It returns false when there
// was no such cluster. Like vault.Vault.Close, it waits up to five seconds
// for a login handler that ignores its context.
func (f *Fleet) Remove(name string) bool {
	const reason = "removed with Fleet.Remove"
	f.mu.Lock()
	m := f.clusters[name]
	if m != nil {
		f.detachLocked(m, &leftError{name: name, reason: reason}) // the name is free at once
	}
	f.mu.Unlock()
	if m == nil {
		return false
	}
	f.left(m, reason)
	f.close(m)
	return true
}

// holds tells whether m is (still) in the fleet.
func (f *Fleet) holds(m *Member) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clusters[m.name] == m
}

// detachMember takes m out of the map if it is still there, its context
// ending for reason, and tells whether it was.
func (f *Fleet) detachMember(m *Member, reason string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clusters[m.name] != m {
		return false
	}
	f.detachLocked(m, &leftError{name: m.name, reason: reason})
	return true
}

// detachLocked takes m out of the map and its metrics out of the
// registerer, together: a cluster of the same name may be added as soon as
// the lock is released, while m's vault is still closing. It ends m's
// context for cause, before OnRemove and before any OnAdd of a namesake.
func (f *Fleet) detachLocked(m *Member, cause error) {
	delete(f.clusters, m.name)
	if m.reg != nil {
		m.reg.drop()
	}
	m.leave(cause)
}

// close tells OnRemove and closes m's vault.
func (f *Fleet) close(m *Member) {
	f.removed(m)
	m.vault.Close()
}

// removed tells OnRemove.
func (f *Fleet) removed(m *Member) {
	if f.opts.OnRemove != nil {
		f.opts.OnRemove(m)
	}
}

// Close removes every cluster, closing their vaults concurrently, and makes
// Add fail with ErrClosed. It is safe to call more than once.
func (f *Fleet) Close() {
	f.mu.Lock()
	f.closed = true
	members := slices.SortedFunc(maps.Values(f.clusters), func(a, b *Member) int { return strings.Compare(a.name, b.name) })
	for _, m := range members {
		f.detachLocked(m, ErrClosed)
	}
	f.mu.Unlock()
	for _, m := range members {
		f.left(m, "the fleet was closed")
	}
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { f.close(m) })
	}
	wg.Wait()
}

func (f *Fleet) lookup(name string) (*Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	m, ok := f.clusters[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCluster, name)
	}
	return m, nil
}
