package shard

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/authvault/authvault/redact"
)

// Driver runs a replica's part in a sharded fleet's ownership protocol:
// it owns the core and its timer, runs the core's lists, writes and
// deletes beside it, gives and takes the host's members as the core says,
// and reports back to it. Nothing that waits on the hub or on a hook runs
// on its loop: a slow list never delays a renewal or a fence.
type Driver struct {
	// Set by New, never changed (stop: by Start).
	host        Host
	cfg         Config
	leases      coordinationv1client.LeaseInterface
	lease       string // this replica's Lease's name
	incarnation string // tells this process's writes from another's of the same identity
	log         logr.Logger
	metrics     *metrics
	clock       clock.Clock
	wakeup      chan struct{}
	stop        context.CancelFunc
	running     sync.WaitGroup // the loop, the watch, the requests and the vaults' Close
	hooks       sync.WaitGroup // the OnAdds and OnRemoves of the clusters taken and given up: the release waits for none
	closed      sync.Once
	hooksDue    time.Time   // set by the first close: when every close stops waiting for the hooks
	deleting    atomic.Bool // stale Leases are being deleted

	inboxMu sync.Mutex // guards inbox
	inbox   []event

	listedMu sync.Mutex                       // guards listed
	listed   map[string]*coordinationv1.Lease // the peers' Leases as last listed, for remove

	view  atomic.Pointer[[]string] // the core's view after its last step, for RESTConfig's errors
	letGo chan struct{}            // the loop's own: closed once the core, closing, holds nothing

	// The writer's own: one write runs at a time, and the release only
	// once the loop has stopped.
	mine    *coordinationv1.Lease // as last written
	foreign *foreignLease         // a Lease of this identity that another process renews
}

// event is something that happened, told to the core on its loop.
type event func(c *core, now time.Time, e *effects)

// foreignLease is this identity's Lease as another process (a duplicate,
// or this one before a restart) last wrote it, and since when it has not
// changed.
type foreignLease struct {
	version string
	since   time.Time
}

// New returns the driver of cfg (defaults applied, Check passed, NotOwned
// set) on leases, the Leases of cfg.Namespace, for host. Start starts it,
// once; Close stops it, after Start.
func New(cfg Config, leases coordinationv1client.LeaseInterface, host Host, clk clock.Clock) *Driver {
	if cfg.NotOwned == nil {
		panic("shard: Config.NotOwned is required: the error a cluster not owned here matches")
	}
	s := &Driver{
		host:        host,
		cfg:         cfg,
		leases:      leases,
		lease:       LeaseName(cfg.Group, cfg.Identity),
		incarnation: string(uuid.NewUUID()),
		log:         cfg.Log.WithValues("group", cfg.Group, "replica", cfg.Identity),
		metrics:     newMetrics(cfg.Registerer, cfg.Group),
		clock:       clk,
		wakeup:      make(chan struct{}, 1),
	}
	s.view.Store(&[]string{})
	return s
}

// Start starts the loop and the watch.
func (s *Driver) Start() {
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	core := newCore(s.cfg)
	s.log.Info("this replica takes its share of the fleet's clusters once it has listed the group's Leases, and not sooner than settle after its start: replicas started within a RetryPeriod of it are counted first, so that each cluster moves once",
		"settle", core.settle, "namespace", s.cfg.Namespace, "lease", s.lease)
	s.running.Go(func() { s.loop(ctx, core) })
	s.running.Go(func() { s.watchLeases(ctx) })
}

// post tells the core of ev at its loop's next turn. It never blocks: the
// host calls it with its lock held.
func (s *Driver) post(ev event) {
	s.inboxMu.Lock()
	s.inbox = append(s.inbox, ev)
	s.inboxMu.Unlock()
	select {
	case s.wakeup <- struct{}{}:
	default:
	}
}

func (s *Driver) drain() []event {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	evs := s.inbox
	s.inbox = nil
	return evs
}

// SeatAdded and SeatGone tell the core of a cluster that joined or left
// the fleet, its seat numbered seat. They never block: the fleet calls
// them with its lock held.
func (s *Driver) SeatAdded(name string, seat uint64) {
	s.post(func(c *core, _ time.Time, _ *effects) { c.seatAdded(name, seat) })
}

func (s *Driver) SeatGone(name string, seat uint64) {
	s.post(func(c *core, now time.Time, _ *effects) { c.seatGone(name, seat, now) })
}

// Stopped and Removed tell the core that the vault of the member gen of
// the cluster name, given up, has closed, and that its OnRemove has
// returned (or it had no OnAdd).
func (s *Driver) Stopped(name string, gen uint64) {
	s.post(func(c *core, _ time.Time, _ *effects) { c.stopped(name, gen) })
}

func (s *Driver) Removed(name string, gen uint64) {
	s.post(func(c *core, _ time.Time, _ *effects) { c.removed(name, gen) })
}

// Go runs fn beside the loop: the release at Close waits for it, as for
// the vaults the driver closes itself.
func (s *Driver) Go(fn func()) { s.running.Go(fn) }

func (s *Driver) loop(ctx context.Context, c *core) {
	timer := s.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.clock.Now()
		var e effects
		for _, ev := range s.drain() {
			ev(c, now, &e)
		}
		c.step(now, &e)
		s.apply(ctx, c, e)
		timer.Stop()
		if !e.next.IsZero() {
			timer.Reset(e.next.Sub(now))
		}
		select {
		case <-ctx.Done():
			c.close()
			return
		case <-s.wakeup:
		case <-timer.C():
		}
	}
}

// apply does what the core decided.
func (s *Driver) apply(ctx context.Context, c *core, e effects) {
	s.logNotes(e.notes)
	dropped, took := s.members(c, e)
	for _, m := range dropped {
		// The vault closes beside OnRemove, not after it: its logins stop
		// now, and a peer may take the cluster once it has closed.
		s.running.Go(func() { m.Stop(); s.Stopped(m.Name, m.Gen) })
		s.hooks.Go(func() { m.Hook(); s.Removed(m.Name, m.Gen) })
	}
	if len(took) > 0 {
		s.hooks.Go(func() {
			for _, m := range took {
				m.Hook()
			}
		})
	}
	if e.write != nil {
		content := *e.write
		s.running.Go(func() { s.renew(ctx, c.timeout, content) })
	}
	if e.list {
		s.running.Go(func() { s.look(ctx, c.timeout) })
	}
	if len(e.deletes) > 0 && s.deleting.CompareAndSwap(false, true) {
		s.running.Go(func() {
			defer s.deleting.Store(false)
			for _, d := range e.deletes {
				if err := s.remove(ctx, d.name, d.rv); err == nil {
					s.log.V(1).Info("deleted the Lease of a replica whose Lease expired", "lease", d.name, "peer", d.holder)
				}
			}
		})
	}
	if e.letGo && s.letGo != nil {
		close(s.letGo)
		s.letGo = nil
	}
	view := c.target
	s.view.Store(&view)
	s.metrics.owned.Set(float64(len(c.owned)))
	s.metrics.replicas.Set(float64(len(view)))
}

// members gives up and takes the members the core says, under the host's
// lock, and returns them.
func (s *Driver) members(c *core, e effects) (dropped, took []Moved) {
	to := map[string]int{}
	var why string
	causes := map[string]error{} // of the clusters given up, for the log
	s.host.Lock()
	for _, d := range e.drops {
		cause := &notOwnedError{name: d.name, self: s.cfg.Identity, owner: d.to, why: d.why, is: s.cfg.NotOwned}
		m, ok := s.host.DropLocked(d.name, d.gen, cause)
		if !ok {
			continue // the host took it out itself, and tells Stopped and Removed
		}
		dropped = append(dropped, m)
		causes[d.name] = cause
		to[d.to]++
		why = d.why
	}
	// What this replica knows of each cluster it takes: the peer whose
	// Lease last claimed it (a claim, not a hold: a peer claims what its
	// view gives it before its holder lets go), itself (given up here, by
	// a fence or a stand-by, and taken back), or nothing (no Lease it has
	// listed claimed it: a cluster new to the group, or one let go before
	// this replica's first list).
	from := map[string]int{}
	moved, back, unclaimed := 0, 0, 0
	for _, t := range e.takes {
		m, ok := s.host.TakeLocked(t.name, t.seat, t.gen)
		if !ok {
			c.takeFailed(t.name, t.gen)
			continue
		}
		took = append(took, m)
		switch t.lost.from {
		case "":
			unclaimed++
		case s.cfg.Identity: // given up here (a fence, a stand-by), taken back
			back++
			s.metrics.unowned.Observe(s.clock.Since(t.lost.since).Seconds())
		default:
			from[t.lost.from]++
			moved++
			s.metrics.unowned.Observe(s.clock.Since(t.lost.since).Seconds())
		}
	}
	s.host.Unlock()
	if s.cfg.Log.V(1).Enabled() {
		for _, m := range dropped {
			s.cfg.Log.V(1).Info("cluster given up", "cluster", m.Name, "cause", causes[m.Name].Error())
		}
	}
	if s.log.V(1).Enabled() { // a cluster's owner, for whoever looks for it
		for _, m := range took {
			s.log.V(1).Info("cluster taken", "cluster", m.Name)
		}
	}
	if n := len(dropped); n > 0 && !fenceIn(e.notes) {
		delete(to, "")
		s.metrics.moves.WithLabelValues("out", "view changed").Add(float64(n))
		s.log.Info("gave clusters up", append([]any{"clusters", n}, append(namedIn(dropped), "to", to, "why", why)...)...)
	}
	if moved > 0 {
		s.metrics.moves.WithLabelValues("in", "taken").Add(float64(moved))
	}
	if len(took) > 0 {
		kv := append([]any{"clusters", len(took)}, namedIn(took)...)
		if moved > 0 {
			kv = append(kv, "lastClaimedBy", from)
		}
		if back > 0 {
			kv = append(kv, "takenBack", back)
		}
		if unclaimed > 0 {
			kv = append(kv, "claimedByNoListedLease", unclaimed)
		}
		s.log.Info("took clusters", kv...)
	}
	return dropped, took
}

// maxNamed is how many clusters a line of a batch names: a thousand taken
// at a start are one line, not a thousand.
const maxNamed = 10

// namedIn is the key-value pairs that name the clusters of ms in a log
// line: "names", the first maxNamed in order, and "more", how many others.
func namedIn(ms []Moved) []any {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	if len(names) <= maxNamed {
		return []any{"names", names}
	}
	return []any{"names", names[:maxNamed], "more", len(names) - maxNamed}
}

func fenceIn(notes []note) bool {
	for _, n := range notes {
		if n.kind == noteFenced {
			return true
		}
	}
	return false
}

// logNotes logs what the core noted: at INFO, a line per change.
func (s *Driver) logNotes(notes []note) {
	for _, n := range notes {
		switch n.kind {
		case noteJoined:
			s.log.Info("replica joined the fleet's group", "peer", n.peer, "replicas", n.n)
		case noteLeft:
			s.log.Info("replica left the fleet's group", "peer", n.peer, "why", n.why, "replicas", n.n)
		case noteSelfJoined:
			s.log.Info("this replica claims its share of the fleet's clusters: it takes each once its holder lets it go")
		case noteStandby:
			s.log.Info("this replica claims no share of the fleet's clusters", "why", n.why)
		case noteWaiting:
			s.log.Info("part of this replica's share is still claimed by a peer", "clusters", n.n, "peer", n.peer, "why", n.why)
		case noteFenced:
			s.metrics.moves.WithLabelValues("out", "lease lost").Add(float64(n.n))
			s.log.Info("gave every cluster up", "clusters", n.n, "why", n.why)
		case noteRefused:
			s.log.Error(nil, "a peer's Lease cannot be read: this replica takes no cluster until it can", "lease", n.lease, "peer", n.peer, "why", n.why)
		case noteListOK:
			s.log.Info("the hub answers again: the group's Leases are listed")
		case noteWriteOK:
			s.log.Info("the hub answers again: this replica's Lease is renewed")
		}
	}
}

// renew writes this replica's Lease with content, and tells the core.
func (s *Driver) renew(ctx context.Context, timeout time.Duration, content leaseContent) {
	res, err := s.write(ctx, content, timeout)
	if err == nil {
		s.metrics.writes.Inc()
	}
	s.post(func(c *core, _ time.Time, e *effects) {
		if err != nil && !c.writeFailed {
			s.log.Error(redact.Error(err), "cannot renew this replica's Lease; retrying every RetryPeriod", "retryPeriod", s.cfg.RetryPeriod)
		}
		c.wrote(content, res, e)
	})
}

// look lists the group's Leases, and tells the core.
func (s *Driver) look(ctx context.Context, timeout time.Duration) {
	start := s.clock.Now()
	leases, err := s.list(ctx, timeout)
	end := s.clock.Now()
	records := make([]leaseRecord, 0, len(leases))
	byName := make(map[string]*coordinationv1.Lease, len(leases))
	for i := range leases {
		if r, ok := s.record(&leases[i]); ok {
			records = append(records, r)
			byName[r.name] = &leases[i]
		}
	}
	if err == nil {
		s.listedMu.Lock()
		s.listed = byName
		s.listedMu.Unlock()
	}
	s.post(func(c *core, _ time.Time, e *effects) {
		if err != nil {
			if !c.listFailed {
				s.log.Error(redact.Error(err), "cannot list the group's Leases; retrying every half RetryPeriod (after RenewDeadline without a list, this replica claims no share)", "retryPeriod", s.cfg.RetryPeriod)
			}
			c.listFailedAt(start, e)
			return
		}
		c.listed(start, end, records, e)
	})
}

// wake makes the loop list the Leases now: a peer's Lease changed.
func (s *Driver) wake() {
	s.post(func(c *core, now time.Time, _ *effects) { c.wake(now) })
}

// NotOwned is RESTConfig's error for the cluster name, which this replica
// does not own: it names the owner as this replica sees it.
func (s *Driver) NotOwned(name string) error {
	return &notOwnedError{name: name, self: s.cfg.Identity, owner: OwnerOf(*s.view.Load(), name), is: s.cfg.NotOwned}
}

// CloseWait bounds how long Close waits for the vaults that a Remove beside
// it is closing: a vault's Close waits five seconds for a login handler
// that ignores its context.
const CloseWait = 6 * time.Second

// HookWait bounds how long Close waits, after the release, for the OnAdds
// and OnRemoves still running: a hung one holds up neither the handover
// nor Close.
const HookWait = 5 * time.Second

// Close stops the loop and marks this replica's Lease released, once every
// vault of its clusters has closed (the fleet's Close has ended their
// contexts and closes them beside their OnRemoves, in others): the peers
// take its clusters at once. Then it waits for others, and for the hooks
// the loop started, HookWait at most.
//
// Every call waits until the same deadline, HookWait after the first
// release: a Close called again (a deferred one beside a manager's) does
// not wait for a hung hook again.
func (s *Driver) Close(others *sync.WaitGroup) {
	s.closed.Do(func() {
		s.leave()
		s.hooksDue = s.clock.Now().Add(HookWait)
	})
	done := make(chan struct{})
	go func() { others.Wait(); s.hooks.Wait(); close(done) }()
	select {
	case <-done:
	case <-s.clock.After(s.hooksDue.Sub(s.clock.Now())):
		s.log.Info("an OnAdd or OnRemove still runs: the fleet's Close returns without waiting for it any longer (the Lease is released, the clusters' contexts and vaults are done)", "waited", HookWait)
	}
}

func (s *Driver) leave() {
	// The release lets the peers take every cluster at once: not while a
	// vault of this replica's may still log in (a Remove beside Close).
	held := make(chan struct{})
	s.post(func(c *core, _ time.Time, _ *effects) {
		s.letGo = held
		c.closeDown()
	})
	select {
	case <-held:
	case <-s.clock.After(CloseWait):
		s.log.Info("releasing this replica's Lease while a cluster's vault is still closing", "waited", CloseWait)
	}
	s.stop()
	s.running.Wait()
	s.metrics.unregister()
	if err := s.release(context.Background()); err != nil {
		s.log.Error(redact.Error(err), "cannot mark this replica's Lease released: the peers take its clusters once it expires")
		return
	}
	s.log.Info("this replica left the fleet's group: the fleet was closed")
}
