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

	"github.com/authvault/authvault/fleet/internal/shard"
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
	// "cluster". Default: the zero logr.Logger, which discards: a fleet
	// without one says nothing, not even which replica took a cluster.
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
	// a ClusterProfile) and, with Shards, owned by this replica, with the
	// cluster and a context that ends when the cluster leaves the fleet
	// (Remove, its Secret or profile gone, Close) or this replica (it
	// moved, the Lease was lost): start what runs against the cluster
	// there (a cluster.Cluster and its controllers) on that context, and it stops
	// when it should. m.RESTConfig waits for the cluster's first login (a
	// config names the cluster's server, known once its handler has logged
	// in: a kubeconfig Secret is read at login, not when it is seen), so
	// call it from what you start, not from OnAdd: OnAdd must not wait for
	// long, since WatchSecrets and WatchClusterProfiles call it from their
	// event handlers, one cluster after another. ctx carries the fleet's
	// Logger with the cluster's name (logr.FromContext), and
	// context.Cause(ctx) says why it ended. It runs on the goroutine that
	// added the cluster (with Shards, the one that took it), without any
	// lock of the fleet's. Default: none.
	OnAdd func(ctx context.Context, m *Member)
	// OnRemove is called when a cluster leaves the fleet (or, with
	// Shards, this replica): after the
	// context OnAdd got has ended, before the cluster's vault closes (with
	// Shards, beside its vault's Close, so that its logins stop at once
	// whatever OnRemove waits for). It
	// is there to wait (briefly) for what OnAdd started to stop; with
	// OnAdd's context, most programs need no OnRemove. It runs on the
	// goroutine that removed the cluster (Close removes them
	// concurrently), without the fleet's lock. OnRemove of a cluster
	// returns before OnAdd of a cluster of the same name added later by
	// the same goroutine or watch. Like OnAdd, it must not wait for
	// long: with Shards, Close waits for the OnRemoves (and the OnAdds)
	// still running five seconds at most, after the Lease's release, and
	// one may still run when Close has returned. Default: none.
	OnRemove func(m *Member)
	// Shards shares the fleet's clusters among the replicas of this
	// program (see "Shards" in the package doc): each cluster has its
	// member, vault and OnAdd on one replica only. Default: nil, and this
	// process owns every cluster.
	Shards *Shards
}

// Fleet holds one vault per cluster. All its methods are safe for concurrent
// use.
type Fleet struct {
	opts   Options
	shards *shard.Driver // nil without Options.Shards: this process owns every cluster

	mu       sync.Mutex // guards clusters, closed, seats, and each seat's member
	clusters map[string]*seat
	closed   bool
	seats    uint64 // seats made so far
}

// New returns an empty fleet. With Options.Shards it joins its group of
// replicas at once, and leaves it at Close; it panics when Shards is
// invalid (a field it requires missing, durations out of order, a budget
// below RetryPeriod: see Shards.RenewDeadline), as a program's mistake to
// fix, not a condition to handle.
func New(opts Options) *Fleet {
	f := &Fleet{opts: opts, clusters: map[string]*seat{}}
	if opts.Shards != nil {
		f.shards = startShards(f, *opts.Shards)
	}
	return f
}

// Add puts a cluster in the fleet, whose credentials come from h (with
// opts, as for vault.OnLogin): handlers.KubeconfigSecret for a kubeconfig
// kept in a Secret, or any login.Handler. Its vault logs in when the
// cluster's config is first used. It returns ErrExists when name is taken
// (Remove it first) and ErrClosed after Close. With Options.Shards, the
// cluster has a vault only on the replica that owns it.
func (f *Fleet) Add(name string, h login.Handler, opts ...login.Option) error {
	if name == "" || h == nil {
		return errors.New("fleet: Add needs a name and a handler")
	}
	s, err := f.add(name, addSource, h, opts)
	if err != nil {
		return err
	}
	f.joined(s, "", "")
	return nil
}

// addSource is the source of the clusters added by Add, in the log.
const addSource = "Fleet.Add"

// joined logs that s has joined the fleet, and tells OnAdd when this
// process owns it. When s takes the place of a seat of its name that has
// just left, previous is that seat's source and change why: one line says
// that the cluster's source changed.
func (f *Fleet) joined(s *seat, previous, change string) {
	if previous == "" {
		f.opts.Logger.Info("cluster joined the fleet", "cluster", s.name, "source", s.sourced())
	} else {
		f.opts.Logger.Info("cluster's source changed", "cluster", s.name, "source", s.sourced(), "previous", previous, "change", change)
	}
	f.mu.Lock()
	m := s.member
	f.mu.Unlock()
	f.tellAdd(m)
}

// left logs that s has left the fleet, and why.
func (f *Fleet) left(s *seat, reason string) {
	f.opts.Logger.Info("cluster left the fleet", "cluster", s.name, "source", s.sourced(), "reason", reason)
}

// add puts a cluster, served by source (for the log), in the fleet. It has
// a member at once unless another replica may own it. A cluster of that
// name that a Flux ConfigMap serves gives it up (see addYielding).
func (f *Fleet) add(name, source string, h login.Handler, opts []login.Option) (*seat, error) {
	return f.addSeat(&seat{name: name, source: source, handler: h, opts: opts})
}

// addYielding is add for a source whose writers may be anyone of a
// namespace (a Flux ConfigMap's): its cluster gives its name up to a
// cluster of any other source (Add, a Secret, a ClusterProfile), which
// takes it out of the fleet, as Remove does, whichever came first. A
// ConfigMap cannot take a Cluster API cluster's name, which only its
// <cluster>-kubeconfig Secret may claim.
func (f *Fleet) addYielding(name, source string, h login.Handler, opts []login.Option) (*seat, error) {
	return f.addSeat(&seat{name: name, source: source, handler: h, opts: opts, yields: true})
}

func (f *Fleet) addSeat(s *seat) (*seat, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, ErrClosed
	}
	var (
		gone   *seat // a yielding seat that gives its name up to s
		member *Member
		reason string
	)
	if old, ok := f.clusters[s.name]; ok {
		if !old.yields || s.yields {
			f.mu.Unlock()
			return nil, fmt.Errorf("%w: %q", ErrExists, s.name)
		}
		gone, reason = old, "its name was taken by "+s.source+": a Flux ConfigMap's cluster gives way to any other source"
		member = f.detachLocked(old, &leftError{name: old.name, reason: reason})
	}
	f.seats++
	s.serial = f.seats
	f.clusters[s.name] = s
	if f.shards == nil {
		s.member = f.newMemberLocked(s)
	} else {
		f.shards.SeatAdded(s.name, s.serial) // its owner takes it
	}
	f.mu.Unlock()
	if gone != nil {
		// Before the caller's joined: OnRemove of the cluster that gave
		// way returns before OnAdd of the one that took its name.
		f.left(gone, reason)
		f.retire(member, nil)
	}
	return s, nil
}

// newMemberLocked makes s's member: its vault, logging in with s's handler.
func (f *Fleet) newMemberLocked(s *seat) *Member {
	vopts := f.opts.Vault
	log := f.opts.Logger.WithValues("cluster", s.name)
	// The vault uses its logger as given: its lines keep the name they had
	// when the vault named itself.
	vopts.Logger = log.WithName("authvault")
	vopts.Registerer = nil
	var reg *registerer
	if f.opts.Registerer != nil {
		reg = &registerer{reg: prometheus.WrapRegistererWith(prometheus.Labels{"cluster": s.name}, f.opts.Registerer)}
		vopts.Registerer = reg
	}
	vopts.Fallback, vopts.NoFallback = nil, true
	m := newMember(s.name, vault.New(vopts), reg, log)
	m.vault.OnLogin(s.handler, s.opts...)
	return m
}

// RESTConfig returns the client-go config of the named cluster, waiting
// within ctx for its first credential: see Member.RESTConfig. With
// Options.Shards, a cluster another replica owns gets an error that names
// that replica and matches ErrNotOwned.
func (f *Fleet) RESTConfig(ctx context.Context, name string) (*rest.Config, error) {
	m, err := f.member(name)
	if err != nil {
		return nil, err
	}
	return m.RESTConfig(ctx)
}

// Vault returns the named cluster's vault, or nil when it is not in the
// fleet or another replica owns it: to Refresh it, check it with Ready, or
// Select a credential.
func (f *Fleet) Vault(name string) *vault.Vault {
	m, err := f.member(name)
	if err != nil {
		return nil
	}
	return m.vault
}

// Names returns the names of the clusters in the fleet, sorted: with
// Options.Shards, those every replica sees, owned here or not.
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
	s := f.clusters[name]
	var m *Member
	if s != nil {
		m = f.detachLocked(s, &leftError{name: name, reason: reason}) // the name is free at once
	}
	f.mu.Unlock()
	if s == nil {
		return false
	}
	f.left(s, reason)
	f.retire(m, nil)
	return true
}

// holds tells whether s is (still) in the fleet.
func (f *Fleet) holds(s *seat) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clusters[s.name] == s
}

// detach takes s out of the fleet if it is still there, its member's
// context ending for reason. It returns the member, nil when this process
// did not own the cluster, and whether s was there.
func (f *Fleet) detach(s *seat, reason string) (*Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clusters[s.name] != s {
		return nil, false
	}
	return f.detachLocked(s, &leftError{name: s.name, reason: reason}), true
}

// detachLocked takes s out of the map and its member's metrics out of the
// registerer, together: a cluster of the same name may be added as soon as
// the lock is released, while the member's vault is still closing. It ends
// the member's context for cause, before OnRemove and before any OnAdd of
// a namesake, and returns the member (nil when there was none).
func (f *Fleet) detachLocked(s *seat, cause error) *Member {
	delete(f.clusters, s.name)
	if f.shards != nil {
		f.shards.SeatGone(s.name, s.serial)
	}
	return s.dropMemberLocked(cause)
}

// refresh makes s's vault log in again now, when this process owns it.
func (f *Fleet) refresh(s *seat) {
	f.mu.Lock()
	m := s.member
	f.mu.Unlock()
	if m != nil {
		m.vault.Refresh()
	}
}

// retire tells OnRemove that m has left and closes its vault: in closing's
// background when closing is not nil, so that a handler that ignores its
// context holds up no other cluster's events. m may be nil (a cluster
// another replica owned).
func (f *Fleet) retire(m *Member, closing *sync.WaitGroup) {
	if m == nil {
		return
	}
	if f.shards != nil {
		// As when a cluster moves: its vault closes beside OnRemove, so
		// that its logins stop now, whatever OnRemove waits for.
		var closed sync.WaitGroup
		closed.Go(func() { m.vault.Close(); f.shards.Stopped(m.name, m.gen) })
		f.tellRemove(m)
		f.shards.Removed(m.name, m.gen)
		if closing != nil {
			closing.Go(closed.Wait)
		} else {
			closed.Wait()
		}
		return
	}
	f.tellRemove(m)
	if closing != nil {
		closing.Go(m.vault.Close)
	} else {
		m.vault.Close()
	}
}

// tellAdd calls OnAdd with m, once, unless m has already been retired.
// The hooks run without any lock of the fleet's or the member's: OnAdd
// may Remove its own cluster.
func (f *Fleet) tellAdd(m *Member) {
	if m == nil {
		return
	}
	m.hooks.Lock()
	first := !m.added && !m.retired
	m.added = true
	m.hooks.Unlock()
	if first && f.opts.OnAdd != nil {
		f.opts.OnAdd(m.ctx, m)
	}
}

// tellRemove calls OnRemove with m, once, when OnAdd had it: a member
// retired before its OnAdd gets neither.
func (f *Fleet) tellRemove(m *Member) {
	m.hooks.Lock()
	tell := m.added && !m.retired
	m.retired = true
	m.hooks.Unlock()
	if tell && f.opts.OnRemove != nil {
		f.opts.OnRemove(m)
	}
}

// Close removes every cluster, closing their vaults concurrently, and makes
// Add fail with ErrClosed. With Options.Shards, it marks this replica's
// Lease released once the vaults have closed, so that the others take its
// clusters at once, while the OnRemoves run; then it waits for them (and
// for the hooks of clusters that moved earlier) five seconds at most. It is
// safe to call more than once.
func (f *Fleet) Close() {
	f.mu.Lock()
	f.closed = true
	seats := slices.SortedFunc(maps.Values(f.clusters), func(a, b *seat) int { return strings.Compare(a.name, b.name) })
	members := make([]*Member, 0, len(seats))
	for _, s := range seats {
		if m := f.detachLocked(s, ErrClosed); m != nil {
			members = append(members, m)
		}
	}
	if f.shards != nil {
		// Under mu: a concurrent Close that found no member, and
		// releases the Lease, waits for these vaults whatever the
		// driver's own wait says, as for everything its Go runs.
		for _, m := range members {
			f.shards.Go(func() { m.vault.Close(); f.shards.Stopped(m.name, m.gen) })
		}
	}
	f.mu.Unlock()
	for _, s := range seats {
		f.left(s, "the fleet was closed")
	}
	if f.shards == nil {
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Go(func() { f.retire(m, nil) })
		}
		wg.Wait()
		return
	}
	// Sharded: the Lease is released once the vaults have closed, not
	// after the OnRemoves, which run beside them: a peer may take a
	// cluster whose context and vault are done, and a slow or hung
	// OnRemove must not hold the whole share up until the Lease expires.
	var onRemoves sync.WaitGroup
	for _, m := range members {
		onRemoves.Go(func() { f.tellRemove(m); f.shards.Removed(m.name, m.gen) })
	}
	f.shards.Close(&onRemoves)
}

// member returns the named cluster's member: ErrClosed, ErrUnknownCluster,
// or, when another replica owns it, an error matching ErrNotOwned.
func (f *Fleet) member(name string) (*Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	s, ok := f.clusters[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCluster, name)
	}
	switch {
	case s.member != nil:
		return s.member, nil
	case f.shards == nil: // not reached: without shards a seat has its member until it leaves
		return nil, fmt.Errorf("%w: %q", ErrUnknownCluster, name)
	}
	return nil, f.shards.NotOwned(name)
}
