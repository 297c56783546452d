package fleet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/authvault/authvault/redact"
)

// sharding decides which of the fleet's clusters this replica owns, with
// the other replicas of its group, on their Leases (see "Shards" in the
// package doc). The watches feed the fleet seats; sharding gives an owned
// seat its member, and takes it back when the cluster moves or this
// replica loses its Lease.
//
// What it rests on: each replica's Lease carries the view (the replicas
// alive as it saw them) that its share is computed over, and it holds no
// cluster outside that share. A replica gives up what it no longer owns
// before it writes a new view, and takes a cluster only when a list made
// after it wrote its view shows no live peer's view giving that peer the
// cluster. Two replicas that want one cluster each write, then list: the
// later list sees the earlier write, so at most one takes it. A peer is
// dead once its Lease has not changed for LeaseDuration on this replica's
// clock; it gave its clusters up RenewDeadline after its last renewal
// began, on its own clock.
type sharding struct {
	fleet  *Fleet
	cfg    Shards
	leases coordinationv1client.LeaseInterface
	lease  string // this replica's Lease's name
	// incarnation tells this process's writes of the Lease from another's
	// of the same identity: a restart's, or a duplicate's.
	incarnation string
	started     time.Time
	log         logr.Logger
	metrics     *shardMetrics
	wakeup      chan struct{}
	fencer      *time.Timer // fires RenewDeadline after the last renewal began
	stop        context.CancelFunc
	running     sync.WaitGroup // the loop, the watch, the fence
	closed      sync.Once

	// Guarded by the fleet's mu.
	owned       map[string]bool // the clusters this replica owns
	view        []string        // the replicas alive as this one last saw them, sorted
	given       []string        // the view whose clusters of others' this replica has given up, OnRemove returned: the one to publish
	renewed     time.Time       // when the last successful renewal began; zero: none, or given up since
	progress    time.Time       // when the loop last listed the Leases or finished a hook (OnAdd, OnRemove, a vault's Close)
	retiring    int             // fences giving clusters up, their OnRemove running: nothing is taken meanwhile
	published   []string        // the view this replica's Lease carries
	publishedAt time.Time       // when the Lease got it

	// The loop's own.
	listedAt time.Time        // when the last successful list began
	peers    map[string]*peer // by Lease name
	wanted   map[string]move  // clusters that moved here, not taken yet
	failing  bool             // the hub failed the last list (logged once)

	// The renewer's own.
	mine         *coordinationv1.Lease // as last written
	renewFailing bool                  // the hub failed the last renewal (logged once)
	stuck        bool                  // renewals held back: the loop makes no progress (logged once)
	renewNow     chan struct{}         // the view changed: write it now
	foreign      *foreignLease         // a Lease of this identity that another process renews, watched
}

// foreignLease is this identity's Lease as another process (a duplicate,
// or this one before a restart) last wrote it, and since when it has not
// changed.
type foreignLease struct {
	version string
	since   time.Time
}

// move is a cluster that moved to this replica: from whom, and since when
// it may have had no owner (its previous owner's last sign of life, or
// when this replica saw that it should take it).
type move struct {
	from  string
	since time.Time
}

func startSharding(f *Fleet, sh Shards) *sharding {
	cfg, err := sh.withDefaults()
	if err != nil {
		panic(err)
	}
	client, err := coordinationv1client.NewForConfig(cfg.Config)
	if err != nil {
		panic(fmt.Errorf("fleet: Shards.Config: %w", redact.Error(err)))
	}
	s := newSharding(f, cfg, client.Leases(cfg.Namespace))
	s.start()
	return s
}

// newSharding is f's sharding with cfg (defaults applied), on leases.
func newSharding(f *Fleet, cfg Shards, leases coordinationv1client.LeaseInterface) *sharding {
	s := &sharding{
		fleet:       f,
		cfg:         cfg,
		leases:      leases,
		lease:       leaseName(cfg.Group, cfg.Identity),
		incarnation: string(uuid.NewUUID()),
		log:         f.opts.Logger.WithValues("group", cfg.Group, "replica", cfg.Identity),
		metrics:     newShardMetrics(f.opts.Registerer, cfg.Group),
		wakeup:      make(chan struct{}, 1),
		renewNow:    make(chan struct{}, 1),
		fencer:      time.NewTimer(time.Hour),
		owned:       map[string]bool{},
		peers:       map[string]*peer{},
		wanted:      map[string]move{},
	}
	s.fencer.Stop()
	return s
}

// start starts the loop, the renewer, the watch and the fence.
func (s *sharding) start() {
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.started = time.Now()
	s.running.Go(func() { s.loop(ctx) })
	s.running.Go(func() { s.renewer(ctx) })
	s.running.Go(func() { s.watchLeases(ctx) })
	s.running.Go(func() { s.fenceLoop(ctx) })
}

// wake makes the loop look again now: a cluster was added, a peer's Lease
// changed.
func (s *sharding) wake() {
	select {
	case s.wakeup <- struct{}{}:
	default:
	}
}

func (s *sharding) loop(ctx context.Context) {
	for pause(ctx, s.tick(ctx), s.wakeup) {
	}
}

// pause waits d, or less when woken, and tells whether ctx is still alive.
func pause(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-t.C:
	}
	return true
}

// tick lists the group's Leases, gives up what this replica no longer
// owns, has the renewer write its view when it changed, and takes what it
// owns and no live peer may hold. It returns how long to wait before the
// next tick unless woken.
func (s *sharding) tick(ctx context.Context) time.Duration {
	if !s.look(ctx) {
		return s.cfg.RetryPeriod / 2
	}
	s.fleet.mu.Lock()
	published, current, publishedAt := s.published, s.view, s.publishedAt
	s.fleet.mu.Unlock()
	if !sameView(published, current) {
		// The renewer writes it, then wakes this loop: a list after
		// that write decides what to take.
		select {
		case s.renewNow <- struct{}{}:
		default:
		}
		return s.untilNext()
	}
	if s.listedAt.After(publishedAt) {
		s.take()
	}
	return s.untilNext()
}

// look lists the Leases and brings the view up to date with them, giving
// up the clusters this replica no longer owns. It tells whether the hub
// answered.
func (s *sharding) look(ctx context.Context) bool {
	start := time.Now()
	leases, err := s.list(ctx)
	if err != nil {
		s.hubFailed(err, "cannot list the group's Leases")
		return false
	}
	s.failing = false
	s.listedAt = start
	s.advance()
	// A version seen is alive as of the list's answer, not its start: the
	// write may have begun after the list did.
	now := time.Now()
	for name, version := range s.observe(leases, now) {
		if err := s.remove(ctx, name, version); err == nil {
			s.log.V(1).Info("deleted the Lease of a replica gone for twice LeaseDuration", "lease", name)
		}
	}
	s.setView(s.wantedView(), now)
	return true
}

// wantedView is the replicas alive now: the live peers, and this replica
// while its Lease holds.
func (s *sharding) wantedView() []string {
	now := time.Now()
	view := slices.Collect(maps.Keys(s.live(now)))
	s.fleet.mu.Lock()
	if !s.renewed.IsZero() && now.Sub(s.renewed) < s.cfg.RenewDeadline {
		view = append(view, s.cfg.Identity)
	}
	s.fleet.mu.Unlock()
	slices.Sort(view)
	return view
}

func (s *sharding) currentView() []string {
	s.fleet.mu.Lock()
	defer s.fleet.mu.Unlock()
	return s.view
}

// setView makes view this replica's, giving up the clusters it no longer
// owns in it, and logs the replicas that joined or left.
func (s *sharding) setView(view []string, now time.Time) {
	old := s.currentView()
	if sameView(old, view) {
		return
	}
	var joined, left []string
	for _, id := range view {
		if !slices.Contains(old, id) {
			joined = append(joined, id)
		}
	}
	for _, id := range old {
		if !slices.Contains(view, id) {
			left = append(left, id)
		}
	}
	if len(old) == 0 && slices.Contains(view, s.cfg.Identity) {
		s.log.Info("this replica is in the fleet's group", "replicas", view)
	} else {
		for _, id := range joined {
			s.log.Info("replica joined the fleet's group", "peer", id, "replicas", len(view))
		}
	}
	for _, id := range left {
		if id != s.cfg.Identity {
			s.log.Info("replica left the fleet's group", "peer", id, "why", s.whyLeft(id), "replicas", len(view))
		}
	}
	s.metrics.replicas.Set(float64(len(view)))
	reason := "replica joined"
	if len(left) > 0 {
		reason = "replica left"
	}
	gone := map[string]bool{}
	for _, id := range left {
		gone[id] = true
	}
	f := s.fleet
	f.mu.Lock()
	s.view = view
	var given []*Member
	to := map[string]int{}
	for name := range s.owned {
		owner := ownerOf(view, name)
		if owner == s.cfg.Identity {
			continue
		}
		delete(s.owned, name)
		to[owner]++
		if seat := f.clusters[name]; seat != nil {
			if m := seat.dropMemberLocked(&notOwnedError{name: name, self: s.cfg.Identity, owner: owner, why: "moved to replica " + owner + ": " + reason}); m != nil {
				given = append(given, m)
			}
		}
	}
	for name := range f.clusters {
		from := ownerOf(old, name)
		if s.owned[name] || from == "" || from == s.cfg.Identity || ownerOf(view, name) != s.cfg.Identity {
			continue
		}
		since := now
		if p := s.peerByIdentity(from); p != nil && gone[from] {
			since = p.seen // it may have stopped right after
		}
		s.wanted[name] = move{from: from, since: since}
	}
	s.metrics.owned.Set(float64(len(s.owned)))
	f.mu.Unlock()
	s.retire(given, true) // OnRemove returned, vaults closed: only then may the view be published
	s.gaveUp(view)
	if n := len(given); n > 0 {
		s.metrics.moves.WithLabelValues("out", reason).Add(float64(n))
		s.log.Info("gave clusters up to other replicas", "clusters", n, "to", to, "reason", reason)
	}
}

// advance records that the loop has made progress: a list, a hook.
func (s *sharding) advance() {
	s.fleet.mu.Lock()
	defer s.fleet.mu.Unlock()
	s.progress = time.Now()
}

// gaveUp records that this replica has given up what others own in view,
// their OnRemove returned: the renewer may publish it, and a peer take
// them, only now.
func (s *sharding) gaveUp(view []string) {
	s.fleet.mu.Lock()
	defer s.fleet.mu.Unlock()
	if sameView(s.view, view) {
		s.given = view
	}
}

// whyLeft says why the replica id left the view.
func (s *sharding) whyLeft(id string) string {
	if p := s.peerByIdentity(id); p != nil && p.released {
		return "its Lease was released"
	}
	return "its Lease was not renewed for LeaseDuration"
}

func (s *sharding) peerByIdentity(id string) *peer {
	for _, p := range s.peers {
		if p.identity == id {
			return p
		}
	}
	return nil
}

// retire tells OnRemove of each member given up, here, one after
// another, and closes their vaults side by side; it returns when they are
// closed (vault.Close waits up to five seconds for a login handler that
// ignores its context), so that no login of the old owner's runs once a
// peer may take the cluster. On the loop (onLoop), each hook is progress
// (see renew); the fence's are not, or a loop that cannot list would
// renew its Lease through its own fences.
func (s *sharding) retire(members []*Member, onLoop bool) {
	var closing sync.WaitGroup
	for _, m := range members {
		if s.fleet.opts.Logger.V(1).Enabled() {
			s.fleet.opts.Logger.V(1).Info("cluster given up to another replica", "cluster", m.name, "cause", context.Cause(m.ctx).Error())
		}
		s.fleet.retire(m, &closing)
		if onLoop {
			s.advance()
		}
	}
	closing.Wait()
	if onLoop {
		s.advance()
	}
}

// take gives this replica the clusters it owns in its view that no live
// peer's view gives that peer.
func (s *sharding) take() {
	now := time.Now()
	live := s.live(now)
	f := s.fleet
	f.mu.Lock()
	if f.closed || s.retiring > 0 || s.renewed.IsZero() || now.Sub(s.renewed) >= s.cfg.RenewDeadline {
		f.mu.Unlock()
		return
	}
	var candidates []string
	for name, seat := range f.clusters {
		if seat.member == nil {
			candidates = append(candidates, name)
		}
	}
	view := s.view
	f.mu.Unlock()

	var mine []string
	waiting := map[string]int{}
	for _, name := range candidates {
		if ownerOf(view, name) != s.cfg.Identity {
			continue
		}
		if holder := claimedBy(live, name); holder != "" {
			waiting[holder]++
			continue
		}
		mine = append(mine, name)
	}
	if len(waiting) > 0 {
		s.log.V(1).Info("waiting for peers to give clusters up", "clusters", waiting)
	}

	var took []*Member
	from := map[string]int{}
	var moved []time.Duration
	f.mu.Lock()
	if f.closed || s.retiring > 0 || !sameView(view, s.view) || !sameView(view, s.published) || s.renewed.IsZero() || time.Since(s.renewed) >= s.cfg.RenewDeadline {
		f.mu.Unlock()
		return
	}
	for _, name := range mine {
		seat := f.clusters[name]
		if seat == nil || seat.member != nil {
			continue
		}
		s.owned[name] = true
		seat.member = f.newMemberLocked(seat)
		took = append(took, seat.member)
		if mv, ok := s.wanted[name]; ok {
			from[mv.from]++
			moved = append(moved, now.Sub(mv.since))
			delete(s.wanted, name)
		}
	}
	for name := range s.owned {
		if f.clusters[name] == nil {
			delete(s.owned, name) // gone from the fleet: taken again, if it comes back, as any other
		}
	}
	for name := range s.wanted {
		if s.owned[name] || f.clusters[name] == nil || ownerOf(s.view, name) != s.cfg.Identity {
			delete(s.wanted, name)
		}
	}
	s.metrics.owned.Set(float64(len(s.owned)))
	f.mu.Unlock()

	for _, d := range moved {
		s.metrics.unowned.Observe(d.Seconds())
	}
	if len(moved) > 0 {
		s.metrics.moves.WithLabelValues("in", "taken").Add(float64(len(moved)))
	}
	if len(took) > 0 {
		s.log.Info("took clusters", "clusters", len(took), "moved", len(moved), "from", from)
	}
	for _, m := range took {
		f.tellAdd(m)
		s.advance()
	}
}

// claimedBy returns the live peer whose view gives it the cluster name,
// or "".
func claimedBy(live map[string]*peer, name string) string {
	for id, p := range live {
		if p.everything || ownerOf(p.view, name) == id {
			return id
		}
	}
	return ""
}

// renewer writes this replica's Lease, with its view, every RetryPeriod,
// and at once when the view changes; apart from the loop, so that a slow
// list never holds a renewal up.
func (s *sharding) renewer(ctx context.Context) {
	for {
		s.renew(ctx)
		if !pause(ctx, s.cfg.RetryPeriod, s.renewNow) {
			return
		}
	}
}

// renew writes this replica's Lease with its view.
func (s *sharding) renew(ctx context.Context) {
	start := time.Now()
	s.fleet.mu.Lock()
	view := s.given
	stuck := start.Sub(s.progress) >= s.cfg.RenewDeadline && start.Sub(s.started) >= s.cfg.RenewDeadline
	s.fleet.mu.Unlock()
	if stuck {
		// The loop has neither listed the Leases nor finished a hook for
		// RenewDeadline (the hub refuses the list, or an OnAdd hangs):
		// renewing would keep this replica's share from its peers while
		// it takes none. Its Lease lapses, and they take its clusters.
		if !s.stuck {
			s.stuck = true
			s.log.Error(nil, "not renewing this replica's Lease: it has neither listed the group's Leases nor finished an OnAdd or OnRemove for RenewDeadline", "renewDeadline", s.cfg.RenewDeadline)
		}
		return
	}
	if s.stuck {
		s.stuck = false
		s.log.Info("this replica's loop goes on: its Lease is renewed again")
	}
	if err := s.write(ctx, view, start.Add(s.cfg.RenewDeadline-s.cfg.RetryPeriod)); err != nil {
		if !s.renewFailing {
			s.renewFailing = true
			s.log.Error(redact.Error(err), "cannot renew this replica's Lease; retrying every RetryPeriod", "retryPeriod", s.cfg.RetryPeriod)
		}
		return
	}
	s.metrics.writes.Inc()
	if s.renewFailing {
		s.renewFailing = false
		s.log.Info("the hub answers again: this replica's Lease is renewed")
	}
	s.fleet.mu.Lock()
	first := s.renewed.IsZero()
	s.renewed = start
	changed := !sameView(s.published, view)
	if changed {
		s.published, s.publishedAt = view, time.Now()
	}
	s.fleet.mu.Unlock()
	s.fencer.Reset(s.cfg.RenewDeadline - time.Since(start))
	if first || changed {
		s.wake() // a list after this write decides
	}
}

// fenceLoop gives every cluster up when the Lease has not been renewed for
// RenewDeadline, whatever the loop is doing.
func (s *sharding) fenceLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.fencer.C:
			s.fence()
		}
	}
}

// fence gives every cluster up if the Lease has not been renewed for
// RenewDeadline: the peers may take them once LeaseDuration has passed.
func (s *sharding) fence() {
	f := s.fleet
	f.mu.Lock()
	if s.renewed.IsZero() || time.Since(s.renewed) < s.cfg.RenewDeadline {
		f.mu.Unlock()
		return
	}
	s.renewed = time.Time{}
	const why = "this replica could not renew its Lease within RenewDeadline"
	var given []*Member
	for name := range s.owned {
		if seat := f.clusters[name]; seat != nil {
			if m := seat.dropMemberLocked(&notOwnedError{name: name, self: s.cfg.Identity, why: why}); m != nil {
				given = append(given, m)
			}
		}
	}
	n := len(s.owned)
	clear(s.owned)
	s.retiring++ // until OnRemove has run for each: take waits
	s.view = slices.DeleteFunc(slices.Clone(s.view), func(id string) bool { return id == s.cfg.Identity })
	s.metrics.owned.Set(0)
	view := s.view
	f.mu.Unlock()
	s.retire(given, false)
	f.mu.Lock()
	s.retiring--
	f.mu.Unlock()
	s.gaveUp(view)
	s.metrics.moves.WithLabelValues("out", "lease lost").Add(float64(n))
	s.log.Info("replica left the fleet's group: gave every cluster up", "peer", s.cfg.Identity, "why", why, "clusters", n)
	s.wake()
}

// untilNext is how long the loop may sleep: a RetryPeriod, or until the
// first live peer would expire.
func (s *sharding) untilNext() time.Duration {
	now := time.Now()
	next := s.cfg.RetryPeriod
	for _, p := range s.live(now) {
		if d := p.seen.Add(s.cfg.LeaseDuration).Sub(now); d < next {
			next = d
		}
	}
	return max(next, 0)
}

// hubFailed logs the hub's first failure of an outage.
func (s *sharding) hubFailed(err error, what string) {
	if !s.failing {
		s.failing = true
		s.log.Error(redact.Error(err), what+"; retrying every RetryPeriod", "retryPeriod", s.cfg.RetryPeriod)
	}
}

// ownsLocked tells whether this replica owns the cluster name; the
// fleet's mu is held.
func (s *sharding) ownsLocked(name string) bool {
	return s.owned[name] && !s.renewed.IsZero() && time.Since(s.renewed) < s.cfg.RenewDeadline
}

// notOwnedLocked is RESTConfig's error for the cluster name, which this
// replica does not own; the fleet's mu is held.
func (s *sharding) notOwnedLocked(name string) error {
	if s == nil {
		return fmt.Errorf("%w: %q", ErrUnknownCluster, name)
	}
	return &notOwnedError{name: name, self: s.cfg.Identity, owner: ownerOf(s.view, name)}
}

// close stops the loop and marks this replica's Lease released, once the fleet
// has ended every member's context: the peers take its clusters at once.
func (s *sharding) close() { s.closed.Do(s.leave) }

func (s *sharding) leave() {
	s.stop()
	s.running.Wait()
	s.fencer.Stop()
	s.metrics.unregister()
	if err := s.release(context.Background()); err != nil {
		s.log.Error(redact.Error(err), "cannot mark this replica's Lease released: the peers take its clusters once it expires")
		return
	}
	s.log.Info("replica left the fleet's group", "peer", s.cfg.Identity, "why", "the fleet was closed")
}
