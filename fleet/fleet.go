package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	// is removed. Default: nil, which registers nothing. A vault of your
	// own on the same registerer (the hub's) needs a cluster label too:
	// prometheus.WrapRegistererWith(prometheus.Labels{"cluster": "hub"},
	// reg), since one registry cannot hold authvault_* with and without it.
	Registerer prometheus.Registerer
	// Vault configures every cluster's vault. Its Logger and Registerer
	// are replaced by the fleet's, and its fallback is always off: a
	// remote cluster never gets this process's own kubeconfig or
	// ServiceAccount.
	Vault vault.Options
	// OnAdd is called with a cluster's name once it is in the fleet (by Add
	// or by a Secret), OnRemove before its vault closes: start and stop what
	// runs against the cluster there (a cluster.Cluster and its
	// controllers). Each runs on the goroutine that added or removed the
	// cluster (Close removes them concurrently), without the fleet's lock;
	// OnRemove of a cluster returns before OnAdd of a cluster of the same
	// name added later by the same goroutine or WatchSecrets. Neither may
	// wait for long: WatchSecrets calls them from its event handler, so
	// start what waits for the cluster (RESTConfig) in a goroutine of your
	// own. Default: none.
	OnAdd, OnRemove func(name string)
}

// Fleet holds one vault per cluster. All its methods are safe for concurrent
// use.
type Fleet struct {
	opts Options

	mu       sync.Mutex // guards clusters and closed
	clusters map[string]*cluster
	closed   bool
}

// cluster is one member of the fleet: its vault, and the config handed out
// for it.
type cluster struct {
	name  string
	vault *vault.Vault
	reg   *registerer // nil without Options.Registerer

	mu  sync.Mutex // guards cfg
	cfg *rest.Config
}

// New returns an empty fleet.
func New(opts Options) *Fleet {
	return &Fleet{opts: opts, clusters: map[string]*cluster{}}
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
	c, err := f.add(name, h, opts)
	if err != nil {
		return err
	}
	f.added(c)
	return nil
}

// added tells OnAdd.
func (f *Fleet) added(c *cluster) {
	if f.opts.OnAdd != nil {
		f.opts.OnAdd(c.name)
	}
}

func (f *Fleet) add(name string, h login.Handler, opts []login.Option) (*cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	if _, ok := f.clusters[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrExists, name)
	}
	vopts := f.opts.Vault
	vopts.Logger = f.opts.Logger.WithValues("cluster", name)
	vopts.Registerer = nil
	var reg *registerer
	if f.opts.Registerer != nil {
		reg = &registerer{reg: prometheus.WrapRegistererWith(prometheus.Labels{"cluster": name}, f.opts.Registerer)}
		vopts.Registerer = reg
	}
	vopts.Fallback, vopts.NoFallback = nil, true
	c := &cluster{name: name, vault: vault.New(vopts), reg: reg}
	c.vault.OnLogin(h, opts...)
	f.clusters[name] = c
	return c, nil
}

// RESTConfig returns the client-go config of the named cluster, waiting
// within ctx for its first credential (see vault.Vault.RESTConfig). Every
// call returns the same *rest.Config for as long as the cluster is in the
// fleet: its credentials rotate underneath it, so clients, informers and
// caches built on it are never rebuilt; exec, attach and port-forward
// streams built on it use the cluster's current credential too. It is
// shared: copy it with rest.CopyConfig before changing it.
func (f *Fleet) RESTConfig(ctx context.Context, name string) (*rest.Config, error) {
	c, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	cfg := c.cfg
	c.mu.Unlock()
	if cfg != nil {
		return cfg, nil
	}
	cfg, err = c.vault.RESTConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: cluster %q: %w", name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg == nil { // the first caller's config is every caller's
		c.cfg = cfg
	}
	return c.cfg, nil
}

// Vault returns the named cluster's vault, or nil when it is not in the
// fleet: to Refresh it, check it with Ready, or Select a credential.
func (f *Fleet) Vault(name string) *vault.Vault {
	c, err := f.lookup(name)
	if err != nil {
		return nil
	}
	return c.vault
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
// its logins stop, its connections close (once the requests on them end),
// its metrics are unregistered, and requests through its config fail with
// vault.ErrClosed. It returns false when there was no such cluster. Like
// vault.Vault.Close, it waits up to five seconds for a login handler that
// ignores its context.
func (f *Fleet) Remove(name string) bool {
	f.mu.Lock()
	c := f.clusters[name]
	if c != nil {
		f.detachLocked(c) // the name is free at once
	}
	f.mu.Unlock()
	if c == nil {
		return false
	}
	f.close(c)
	return true
}

// holds tells whether c is (still) in the fleet.
func (f *Fleet) holds(c *cluster) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clusters[c.name] == c
}

// detachCluster takes c out of the map if it is still there, and tells
// whether it was.
func (f *Fleet) detachCluster(c *cluster) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clusters[c.name] != c {
		return false
	}
	f.detachLocked(c)
	return true
}

// detachLocked takes c out of the map and its metrics out of the
// registerer, together: a cluster of the same name may be added as soon as
// the lock is released, while c's vault is still closing.
func (f *Fleet) detachLocked(c *cluster) {
	delete(f.clusters, c.name)
	if c.reg != nil {
		c.reg.drop()
	}
}

// close tells OnRemove and closes c's vault.
func (f *Fleet) close(c *cluster) {
	f.removed(c)
	c.vault.Close()
}

// removed tells OnRemove.
func (f *Fleet) removed(c *cluster) {
	if f.opts.OnRemove != nil {
		f.opts.OnRemove(c.name)
	}
}

// Close removes every cluster, closing their vaults concurrently, and makes
// Add fail with ErrClosed. It is safe to call more than once.
func (f *Fleet) Close() {
	f.mu.Lock()
	f.closed = true
	clusters := slices.Collect(maps.Values(f.clusters))
	for _, c := range clusters {
		f.detachLocked(c)
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range clusters {
		wg.Go(func() { f.close(c) })
	}
	wg.Wait()
}

func (f *Fleet) lookup(name string) (*cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	c, ok := f.clusters[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCluster, name)
	}
	return c, nil
}
