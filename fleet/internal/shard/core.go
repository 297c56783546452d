package shard

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// core is the ownership protocol of a sharded fleet (see "Shards" in
// the fleet package's doc) as a state machine: each event is a method
// that takes the time it happened at, and step returns what the driver
// must do (list the Leases, write this replica's, delete a stale one, take
// clusters, drop clusters with a cause). Like the vault's core it holds no
// lock, reads no clock, starts no goroutine and never sees the fleet, so
// that tests drive it directly on a fake clock (core_test.go,
// schedule_test.go and the model test). The Driver calls it from one
// goroutine.
//
// What it rests on, event by event:
//
//   - Every Lease of the group carries this package's finalizer, so that
//     a delete (kubectl, DeleteCollection, a namespace's deletion) only
//     marks it: a Lease leaves the hub only once its holder, holding
//     nothing, takes the finalizer off, or a peer does once the Lease has
//     expired (below), at the version it listed (the holder fenced itself
//     before), or a person does it by hand
//     (the exception fleet/doc.go names). So a Lease gone from a list
//     claims nothing, and a replica that starts sees, in its first list,
//     every replica that may hold a cluster.
//   - A replica holds a cluster (a live member, or a vault not yet closed)
//     only while its last counted renewal began less than RenewDeadline
//     ago, and only clusters its Lease, as last written, gives it. A
//     renewal counts only if it completed within the request timeout.
//   - A replica whose Lease is marked for deletion stands by: it gives
//     every cluster up, writes that it holds nothing, takes its finalizer
//     off (the Lease goes) and writes a new Lease. One whose Lease went
//     under it (the finalizer taken off by someone else) fences at once.
//   - A peer is expired only when a list that began LeaseDuration (the
//     peer's own, as its Lease says, up to four times this replica's)
//     after this replica first saw the peer's current version still shows
//     that version.
//   - A replica takes a cluster only after a list that began after its own
//     Lease was written with the view that gives it the cluster, showing
//     no live peer that claims it: of two replicas that write and then
//     list, the later list sees the earlier write.
//   - A replica that has just started takes nothing until a list that
//     began settle (RetryPeriod and a quarter) after its start: the Leases
//     of the replicas started within a RetryPeriod of it are in that list,
//     so that replicas started together agree on the view before any
//     takes, and each cluster moves once.
//   - A replica claims a share (its Lease's view holds it) only when it
//     can take it: so a peer never waits on a share nobody takes.
type core struct {
	// Set by newCore, never changed.
	self       string
	rd, ld, rp time.Duration // RenewDeadline, LeaseDuration, RetryPeriod
	timeout    time.Duration // of each Lease request: budget/4
	settle     time.Duration // from its start, how long a replica takes nothing
	rules      int
	startedAt  time.Time // the first step's time

	// This replica's Lease.
	renewed     time.Time    // start of the last renewal that counts; zero: none, or fenced since
	lifeUID     string       // the Lease's UID as last written; "": none known
	marked      bool         // the Lease is marked for deletion: give everything up, then let it go
	heldBy      []string     // others' finalizers that keep it marked once this one's is off
	writing     bool         // a write is in flight
	inflight    leaseContent // what it writes: it may land whatever its answer
	wroteAt     time.Time    // when the last write began
	nextWrite   time.Time    // the next renewal
	published   leaseContent // as last written
	publishedAt time.Time    // when that write ended; zero: never, or a write failed since (it may land yet)
	given       leaseContent // what the next write writes: target once nothing held is outside it
	writeFailed bool         // the last write failed (logged once)

	// The lists.
	listing    bool
	listTried  time.Time // when the last list began, whatever its answer
	nextList   time.Time
	listedAt   time.Time // start of the last successful list
	listedEnd  time.Time // and its end
	joined     bool      // listed once: may claim a share
	waitNoted  bool      // said, once its settle was over, what its share waits for
	listFailed bool      // the last list failed (logged once)
	peers      map[string]*peerLease

	// The clusters.
	seats    map[string]uint64   // every cluster of the fleet, owned or not, with its seat's number
	owned    map[string]uint64   // the clusters this replica holds, with their member's number
	ownedAt  map[string]uint64   // and the number of the seat each member is of
	retiring map[string][]*drop  // dropped, not yet both stopped and removed
	lost     map[string]lostFrom // who last held a cluster that may have no owner now, and since when
	gen      uint64              // the last member number handed out

	// What the last step decided.
	target  []string // the replicas that share the clusters, as this one sees them
	standby string   // why this replica claims no share; "" while it does
	closing bool     // the fleet is closing: take nothing, and say when nothing is held
	closed  bool
}

// leaseContent is what a replica writes in its Lease.
type leaseContent struct {
	view    []string // the replicas whose shares it computes; holds the writer while it claims one
	standby bool     // claims nothing (written as released)
	free    bool     // standby, and the finalizer taken off: a Lease marked for deletion goes
}

func (a leaseContent) equal(b leaseContent) bool {
	return a.standby == b.standby && a.free == b.free && slices.Equal(a.view, b.view)
}

// leaseRecord is a peer's Lease as a list showed it, decoded by the driver.
type leaseRecord struct {
	name, holder, rv string
	view             []string
	readable         bool // the view annotation decoded
	released         bool // stopped cleanly, or standing by: claims nothing
	rules            int
	duration         time.Duration // the holder's LeaseDuration
	guarded          bool          // it carries the finalizer: it cannot leave the hub while it claims
	marked           bool          // marked for deletion: its holder gives its clusters up
}

// peerLease is a peer's Lease as this replica last saw it.
type peerLease struct {
	leaseRecord
	firstSeen time.Time // end of the list that first showed this version
	expired   bool      // a list confirmed it unchanged for its duration
	missing   time.Time // for a Lease without the finalizer (an older release's): end of the first list it was absent from; zero: listed
}

// claims tells whether p's replica may hold the cluster name.
func (p *peerLease) claims(name string, rules int) bool {
	switch {
	case p.expired || p.released:
		return false
	case !p.readable || !p.missing.IsZero():
		return true
	case !slices.Contains(p.view, p.holder):
		return false
	case p.rules != rules:
		return true // its placement is not ours to compute
	}
	return OwnerOf(p.view, name) == p.holder
}

// member tells whether p's replica is one that shares the clusters: alive,
// under these rules, claiming its share.
func (p *peerLease) member(rules int) bool {
	return !p.expired && !p.released && p.readable && p.rules == rules && slices.Contains(p.view, p.holder)
}

// drop is a cluster this replica gave up, until its vault has closed
// (stopped: no login of this replica's runs for it) and its OnRemove has
// returned (removed: it may be taken here again).
type drop struct {
	gen              uint64
	at               time.Time
	stopped, removed bool
}

// lostFrom is a cluster's last holder, and since when it may hold nothing.
type lostFrom struct {
	from  string
	since time.Time
}

// effects are what the driver must do after an event.
type effects struct {
	list    bool
	write   *leaseContent
	deletes []leaseRecord // stale Leases: delete if still at rv
	takes   []taking
	drops   []giving
	notes   []note
	letGo   bool      // closing, and nothing is held: the Lease may be released
	next    time.Time // when to call tick; zero: no timer
}

// taking is a cluster to take, with its member's number.
type taking struct {
	name string
	gen  uint64
	seat uint64   // the seat's number: a seat of the name added since is not this one
	lost lostFrom // from "": no one held it before
}

// giving is a cluster to give up: end its member's context with why.
type giving struct {
	name string
	gen  uint64
	to   string // its owner now; "" for none
	why  string
}

// note is something the driver logs.
type note struct {
	kind  noteKind
	peer  string
	lease string
	why   string
	n     int
}

type noteKind int

const (
	noteJoined     noteKind = iota // peer joined the view
	noteLeft                       // peer left the view, why
	noteSelfJoined                 // this replica claims a share again
	noteStandby                    // this replica claims no share, why
	noteFenced                     // gave n clusters up: no renewal within RenewDeadline
	noteRefused                    // peer's Lease cannot be followed: why
	noteListFailed                 // (driver adds the error)
	noteListOK
	noteWriteFailed
	noteWriteOK
	noteWaiting // settled, n clusters of its share are claimed by peer: taken when it lets go (why)
)

// coreRules is the version of the placement rules this code computes
// claims with: rendezvous hashing over a view that holds a replica while it
// claims a share. A Lease without it is of rules 1 (before the Lease said).
//
// Rules 3 add the finalizer: a replica of rules 3 stands by while one of
// rules 2 lives, whose Lease may vanish under it.
const coreRules = 3

// finalizerRules are the first rules whose Leases carry the finalizer.
const finalizerRules = 3

func newCore(sh Config) *core {
	budget := sh.LeaseDuration - sh.RenewDeadline
	c := &core{
		self: sh.Identity, rd: sh.RenewDeadline, ld: sh.LeaseDuration, rp: sh.RetryPeriod,
		timeout: budget / 4, rules: coreRules,
		peers: map[string]*peerLease{}, seats: map[string]uint64{}, owned: map[string]uint64{}, ownedAt: map[string]uint64{},
		retiring: map[string][]*drop{}, lost: map[string]lostFrom{},
		standby: "it has not yet listed the group's Leases",
	}
	c.settle = c.rp + c.rp/4
	return c
}

// listed records a list of the group's Leases that began at start and
// answered at end: all of them but this replica's own.
func (c *core) listed(start, end time.Time, leases []leaseRecord, e *effects) {
	c.listing = false
	c.nextList = start.Add(c.rp)
	if start.Before(c.publishedAt) {
		// It began before this replica's Lease said its view: a list
		// after that write decides what to take, now, not a RetryPeriod
		// later.
		c.nextList = end
	}
	if c.listFailed {
		c.listFailed = false
		e.notes = append(e.notes, note{kind: noteListOK})
	}
	c.listedAt, c.listedEnd = start, end
	seen := make(map[string]bool, len(leases))
	for _, r := range leases {
		seen[r.name] = true
		p := c.peers[r.name]
		if p == nil || p.rv != r.rv {
			old := p
			p = &peerLease{leaseRecord: r, firstSeen: end}
			c.peers[r.name] = p
			if r.duration <= 0 {
				p.duration = c.ld
			}
			p.duration = min(p.duration, maxPeerDuration(c.ld))
			if old != nil {
				c.noteLoss(old, p, old.firstSeen) // it may have let go right after its last version that claimed them
			}
			if !r.readable && (old == nil || old.readable) {
				e.notes = append(e.notes, note{kind: noteRefused, peer: r.holder, lease: r.name, why: "its Lease's view cannot be read: it may hold any cluster, and none is taken meanwhile"})
			}
			continue
		}
		p.missing = time.Time{}
		if !p.expired && !start.Before(p.firstSeen.Add(p.duration)) {
			c.noteLoss(p, nil, p.firstSeen)
			p.expired = true
		}
		if p.expired {
			// Its holder has given everything up: the Lease goes, so that
			// a replica that starts now need not wait it out too.
			e.deletes = append(e.deletes, p.leaseRecord)
		}
	}
	for name, p := range c.peers {
		switch {
		case seen[name]:
		case p.expired:
			delete(c.peers, name)
		case p.guarded || p.rules >= finalizerRules:
			// Gone with its finalizer: taken off by its holder, which held
			// nothing then (a clean release shows that version, without
			// the finalizer, for a moment), or by a peer at a version that
			// had expired.
			c.noteLoss(p, nil, p.firstSeen)
			delete(c.peers, name)
		case p.missing.IsZero():
			// An older release's Lease, which a delete removes at once: it
			// may have been written again (a replica that stood by may
			// claim a share now) before it went.
			p.missing = end
		case !start.Before(p.missing.Add(p.duration)):
			c.noteLoss(p, nil, p.firstSeen)
			delete(c.peers, name)
		}
	}
	c.joined = true
}

// maxPeerDuration bounds the LeaseDuration a peer's Lease may claim, for
// a replica of LeaseDuration ld: one that said a thousand hours (a typo,
// or garbage) would hold every take back for that long. Replicas of one
// group keep their durations within four times of each other.
func maxPeerDuration(ld time.Duration) time.Duration { return max(4*ld, time.Minute) }

// noteLoss records, for each seat that old claimed and now (nil: nothing)
// does not, that it may have had no owner since since.
func (c *core) noteLoss(old, now *peerLease, since time.Time) {
	if old == nil || old.expired || old.released || !old.readable || old.rules != c.rules || !slices.Contains(old.view, old.holder) {
		return
	}
	if now != nil && now.released == old.released && now.readable && now.rules == old.rules && slices.Equal(now.view, old.view) {
		return // a renewal: it claims what it claimed
	}
	for name := range c.seats {
		if OwnerOf(old.view, name) == old.holder && (now == nil || !now.claims(name, c.rules)) {
			c.lost[name] = lostFrom{from: old.holder, since: since}
		}
	}
}

// listFailed records a failed list that began at start.
func (c *core) listFailedAt(start time.Time, e *effects) {
	c.listing = false
	c.nextList = start.Add(c.rp / 2)
	if !c.listFailed {
		c.listFailed = true
		e.notes = append(e.notes, note{kind: noteListFailed})
	}
}

// writeResult is a write of this replica's Lease, as the driver saw it.
type writeResult struct {
	start, end time.Time
	ok         bool
	uid        string   // the Lease's UID after the write
	gone       bool     // the Lease was found gone (its finalizer taken off by someone else), or replaced
	marked     bool     // the Lease, as written, is marked for deletion
	heldBy     []string // free and marked: the finalizers that hold it
}

// wrote records a write of content.
func (c *core) wrote(content leaseContent, r writeResult, e *effects) {
	c.writing = false
	if r.gone && !content.free {
		// Its finalizer was taken off by another: peers may have taken
		// what it claimed. (Letting its marked Lease go, it is expected.)
		c.lifeUID = ""
		c.fenceNow(r.end, e, "this replica's Lease went from the hub under it (its finalizer taken off by someone else): its peers may take its clusters")
	}
	if content.free {
		c.lifeUID = "" // whatever its answer, it may have let its Lease go
	}
	if !r.ok {
		// What the hub holds is now this content or the last: until a write
		// succeeds, nothing is taken on either.
		c.publishedAt = time.Time{}
		if !c.writeFailed {
			c.writeFailed = true
			e.notes = append(e.notes, note{kind: noteWriteFailed})
		}
		return
	}
	if c.writeFailed {
		c.writeFailed = false
		e.notes = append(e.notes, note{kind: noteWriteOK})
	}
	if r.uid != c.lifeUID {
		if c.lifeUID != "" && !content.free {
			c.fenceNow(r.end, e, "this replica's Lease was replaced under it: its peers may take its clusters")
		}
		c.lifeUID = r.uid
	}
	c.marked = r.marked && !content.free
	c.heldBy = r.heldBy
	// A list after the write that first said this content decides what
	// to take: a renewal of the same content changes nothing a peer sees.
	changed := !content.equal(c.published) || c.publishedAt.IsZero()
	if changed {
		c.published, c.publishedAt = content, r.end
	}
	if content.free && r.marked {
		// Another finalizer holds it: it stays marked, and this replica
		// stands by, writing it each RetryPeriod, until it goes.
		c.marked = true
		c.heldBy = r.heldBy
		c.lifeUID = r.uid
		c.published, c.publishedAt = content, r.end
		if r.end.Sub(r.start) <= c.timeout && r.start.After(c.renewed) {
			c.renewed = r.start
		}
		return
	}
	if content.free {
		// The Lease is gone: the next write creates one, which claims
		// nothing until it says a view.
		c.lifeUID = ""
		c.published = leaseContent{}
		c.publishedAt = time.Time{}
		return
	}
	if r.end.Sub(r.start) <= c.timeout && r.start.After(c.renewed) {
		c.renewed = r.start
	}
	if changed {
		c.nextList = r.end // a list after this write decides what to take
	}
}

// target0 is the content this replica means to write.
func (c *core) target0() leaseContent {
	return leaseContent{view: c.target, standby: c.standby != ""}
}

// seatAdded records a cluster that joined the fleet, in its seat number.
func (c *core) seatAdded(name string, seat uint64) { c.seats[name] = seat }

// seatGone records a cluster that left the fleet; if this replica held it,
// the fleet has ended its member's context, and says when its vault has
// closed and its OnRemove returned (stopped, removed).
func (c *core) seatGone(name string, seat uint64, now time.Time) {
	if c.seats[name] == seat {
		delete(c.seats, name)
		delete(c.lost, name)
	}
	if gen, ok := c.owned[name]; ok && c.ownedAt[name] == seat {
		delete(c.owned, name)
		delete(c.ownedAt, name)
		c.retiring[name] = append(c.retiring[name], &drop{gen: gen, at: now})
	}
}

// stopped records that the vault of a member given up has closed.
func (c *core) stopped(name string, gen uint64) { c.retired(name, gen, true) }

// removed records that OnRemove of a member given up has returned, or that
// it had no OnAdd to undo.
func (c *core) removed(name string, gen uint64) { c.retired(name, gen, false) }

func (c *core) retired(name string, gen uint64, stop bool) {
	ds := c.retiring[name]
	for i, d := range ds {
		if d.gen != gen {
			continue
		}
		if stop {
			d.stopped = true
		} else {
			d.removed = true
		}
		if d.stopped && d.removed {
			ds = slices.Delete(ds, i, i+1)
		}
		break
	}
	if len(ds) == 0 {
		delete(c.retiring, name)
	} else {
		c.retiring[name] = ds
	}
}

// takeFailed records that a take found its seat gone.
func (c *core) takeFailed(name string, gen uint64) {
	if g, ok := c.owned[name]; ok && g == gen {
		delete(c.owned, name)
		delete(c.ownedAt, name)
	}
}

// wake makes the next step list at once (a peer's Lease changed).
func (c *core) wake(now time.Time) { c.nextList = now }

// closeDown makes the core take nothing more and say, with letGo, once
// it holds nothing: the fleet is closing, and its Lease may be released
// only then (a Remove's vault may still be closing).
func (c *core) closeDown() { c.closing = true }

// close stops the core: nothing is written, listed or taken again.
func (c *core) close() { c.closed = true }

// holds tells whether this replica's vault may still log in to name.
func (c *core) holds(name string) bool {
	if _, ok := c.owned[name]; ok {
		return true
	}
	for _, d := range c.retiring[name] {
		if !d.stopped {
			return true
		}
	}
	return false
}

// step decides, at now, what the driver does next.
func (c *core) step(now time.Time, e *effects) {
	if c.closed {
		return
	}
	if c.startedAt.IsZero() {
		c.startedAt = now
	}
	c.fence(now, e)
	if c.closing && c.holdsNothing() {
		e.letGo = true
	}
	c.decideStandby(now, e)
	c.setTarget(e)
	c.dropOthers(now, e)
	if c.gateOpen(c.target0()) {
		c.given = c.target0()
	}
	if c.marked && c.published.standby && !c.publishedAt.IsZero() && c.holdsNothing() {
		// Its Lease says it holds nothing, and it does: the finalizer may
		// come off, and the next write creates a Lease.
		c.given = leaseContent{standby: true, free: true}
	}
	// A failed write is tried again after RetryPeriod, whatever changed.
	if !c.writing && (!now.Before(c.nextWrite) || !c.writeFailed && !c.given.equal(c.published)) {
		c.writing = true
		c.wroteAt = now
		c.nextWrite = now.Add(c.rp)
		content := c.given
		c.inflight = content
		e.write = &content
	}
	if !c.listing && (!now.Before(c.nextList) || c.expiryDue(now) || c.settleDue(now)) {
		c.listing = true
		c.listTried = now
		e.list = true
	}
	c.take(now, e)
	c.schedule(now, e)
}

// holdsNothing tells whether no vault of this replica's may log in to any
// cluster.
func (c *core) holdsNothing() bool {
	return len(c.owned) == 0 && !slices.ContainsFunc(slices.Collect(maps.Keys(c.retiring)), c.holds)
}

// settleDue tells whether the settle has just ended with no list begun
// since: a list now may let this replica take its share.
func (c *core) settleDue(now time.Time) bool {
	at := c.startedAt.Add(c.settle)
	return !now.Before(at) && c.listTried.Before(at)
}

// expiryDue tells whether a live peer's Lease may have expired since the
// last list began: a list now confirms it, rather than one up to a
// RetryPeriod later.
func (c *core) expiryDue(now time.Time) bool {
	for _, p := range c.peers {
		if at := p.firstSeen.Add(p.duration); !p.expired && !now.Before(at) && c.listTried.Before(at) {
			return true
		}
	}
	return false
}

// eligible tells whether a renewal that counts began within RenewDeadline.
func (c *core) eligible(now time.Time) bool {
	return !c.renewed.IsZero() && now.Before(c.renewed.Add(c.rd))
}

// fence gives every cluster up once the last counted renewal is
// RenewDeadline old: from then on the peers may take them.
func (c *core) fence(now time.Time, e *effects) {
	if c.renewed.IsZero() || c.eligible(now) {
		return
	}
	c.fenceNow(now, e, "no renewal of this replica's Lease counted within RenewDeadline (failed, or slower than its timeout)")
}

// fenceNow gives every cluster up at once, for why.
func (c *core) fenceNow(now time.Time, e *effects, why string) {
	c.renewed = time.Time{}
	n := c.dropWhere(now, e, func(string) (bool, string, string) { return true, "", why })
	e.notes = append(e.notes, note{kind: noteFenced, n: n, why: why})
}

// dropWhere gives up each owned cluster that should go (with its new
// owner and why), and tells how many it gave up.
func (c *core) dropWhere(now time.Time, e *effects, should func(string) (bool, string, string)) int {
	n := 0
	for _, name := range slices.Sorted(maps.Keys(c.owned)) {
		ok, to, why := should(name)
		if !ok {
			continue
		}
		gen := c.owned[name]
		delete(c.owned, name)
		delete(c.ownedAt, name)
		c.retiring[name] = append(c.retiring[name], &drop{gen: gen, at: now})
		c.lost[name] = lostFrom{from: c.self, since: now}
		e.drops = append(e.drops, giving{name: name, gen: gen, to: to, why: why})
		n++
	}
	return n
}

// decideStandby decides whether this replica claims a share.
func (c *core) decideStandby(now time.Time, e *effects) {
	why := ""
	switch {
	case c.marked && len(c.heldBy) > 0:
		why = "its Lease was deleted, and finalizers of others hold it on the hub " + fmt.Sprint(c.heldBy) + ": it claims no share until they are taken off"
	case c.marked:
		why = "its Lease was deleted (kubectl delete, a namespace's deletion): it gives its clusters up, lets that Lease go and writes a new one"
	case !c.listedAt.IsZero() && now.Sub(c.listedAt) >= c.rd:
		// Its peers count it in their views, and it cannot see that its
		// share grew (a peer gone): it gives its share to them until its
		// next list.
		why = "it has not listed the group's Leases for RenewDeadline"
	case !c.joined:
		why = "it has not yet listed the group's Leases"
	default:
		if p := c.lowerRules(); p != nil {
			why = "replica " + p.holder + " runs older placement rules: the oldest rules share the clusters"
		} else if name := c.stuckInShare(now); name != "" {
			why = "OnRemove or the vault's Close of cluster " + name + " has not returned: its share goes to the others"
		}
	}
	if why != c.standby {
		if why == "" {
			e.notes = append(e.notes, note{kind: noteSelfJoined})
		} else {
			e.notes = append(e.notes, note{kind: noteStandby, why: why})
		}
		c.standby = why
	}
}

// lowerRules returns a live peer that claims a share under older rules.
func (c *core) lowerRules() *peerLease {
	for _, name := range slices.Sorted(maps.Keys(c.peers)) {
		if p := c.peers[name]; !p.expired && !p.released && p.readable && p.rules < c.rules {
			return p
		}
	}
	return nil
}

// stuckInShare returns a cluster of this replica's share (with it in the
// view) that it gave up over a budget ago and cannot take again yet.
func (c *core) stuckInShare(now time.Time) string {
	view := c.members()
	view = append(view, c.self)
	slices.Sort(view)
	for _, name := range slices.Sorted(maps.Keys(c.retiring)) {
		for _, d := range c.retiring[name] {
			if _, ok := c.seats[name]; ok && now.Sub(d.at) >= c.ld-c.rd && OwnerOf(view, name) == c.self {
				return name
			}
		}
	}
	return ""
}

// members returns the peers that share the clusters, unsorted.
func (c *core) members() []string {
	var ids []string
	for _, p := range c.peers {
		if p.member(c.rules) && p.holder != c.self && !slices.Contains(ids, p.holder) {
			ids = append(ids, p.holder)
		}
	}
	return ids
}

// setTarget computes the view and notes the replicas that joined or left.
func (c *core) setTarget(e *effects) {
	view := c.members()
	if c.standby == "" {
		view = append(view, c.self)
	}
	slices.Sort(view)
	if slices.Equal(view, c.target) {
		return
	}
	for _, id := range view {
		if id != c.self && !slices.Contains(c.target, id) {
			e.notes = append(e.notes, note{kind: noteJoined, peer: id, n: len(view)})
		}
	}
	for _, id := range c.target {
		if id != c.self && !slices.Contains(view, id) {
			e.notes = append(e.notes, note{kind: noteLeft, peer: id, why: c.whyLeft(id), n: len(view)})
		}
	}
	c.target = view
}

// whyLeft says why the replica id is no longer in the view.
func (c *core) whyLeft(id string) string {
	for _, p := range c.peers {
		if p.holder != id {
			continue
		}
		switch {
		case p.released:
			return "its Lease says it holds nothing (it stopped, or stands by)"
		case p.rules != c.rules:
			return "it runs other placement rules"
		}
	}
	return "its Lease was gone, unreadable, or not renewed for its LeaseDuration"
}

// dropOthers gives up each owned cluster that is not this replica's in
// the target view.
func (c *core) dropOthers(now time.Time, e *effects) {
	c.dropWhere(now, e, func(name string) (bool, string, string) {
		owner := OwnerOf(c.target, name)
		if owner == c.self {
			return false, "", ""
		}
		if owner == "" || c.standby != "" {
			// Standing by, it gives its share up for its own reason: a
			// replica cut from the hub cannot know where the clusters go.
			return true, owner, "this replica stands by: " + c.standby
		}
		return true, owner, "moved to replica " + owner
	})
}

// gateOpen tells whether content may be written: every cluster this
// replica may still log in to is its own under content.
func (c *core) gateOpen(content leaseContent) bool {
	for name := range c.owned {
		if content.standby || OwnerOf(content.view, name) != c.self {
			return false
		}
	}
	for name, ds := range c.retiring {
		for _, d := range ds {
			if !d.stopped && (content.standby || OwnerOf(content.view, name) != c.self) {
				return false
			}
		}
	}
	return true
}

// take takes the clusters of this replica's share that no live peer
// claims, once a list after its Lease said so allows it.
func (c *core) take(now time.Time, e *effects) {
	if why := c.cannotTake(now); why != "" || c.closing {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(c.seats)) {
		if _, ok := c.owned[name]; ok || len(c.retiring[name]) > 0 || OwnerOf(c.target, name) != c.self || c.claimed(name) {
			continue
		}
		c.gen++
		c.owned[name] = c.gen
		c.ownedAt[name] = c.seats[name]
		t := taking{name: name, gen: c.gen, seat: c.seats[name], lost: c.lost[name]}
		delete(c.lost, name)
		e.takes = append(e.takes, t)
	}
	if !c.waitNoted {
		c.waitNoted = true
		c.noteWaiting(e)
	}
}

// noteWaiting notes, once this replica could first take, the peer that
// still claims the most of its share, if any: a new replica says why its
// share is not all taken yet.
func (c *core) noteWaiting(e *effects) {
	by := map[string]int{}
	for name := range c.seats {
		if OwnerOf(c.target, name) != c.self {
			continue
		}
		if _, ok := c.owned[name]; ok {
			continue
		}
		for _, p := range c.peers {
			if p.claims(name, c.rules) {
				by[p.holder]++
				break
			}
		}
	}
	peer, n := "", 0
	for _, id := range slices.Sorted(maps.Keys(by)) {
		if by[id] > n {
			peer, n = id, by[id]
		}
	}
	if n == 0 {
		return
	}
	why := "it takes them as that replica lets them go, or, if it has stopped, once its Lease has not changed for its LeaseDuration"
	for _, p := range c.peers {
		if p.holder == peer && p.marked {
			why = "that replica's Lease was deleted: it gives them up, or, if it has stopped, they are taken once its Lease has not changed for its LeaseDuration"
		}
	}
	e.notes = append(e.notes, note{kind: noteWaiting, peer: peer, n: n, why: why})
}

// cannotTake says why nothing may be taken now, or "".
func (c *core) cannotTake(now time.Time) string {
	switch {
	case c.standby != "":
		return c.standby
	case !c.eligible(now):
		return "its Lease has no renewal that counts"
	case !c.published.equal(c.target0()) || !c.given.equal(c.published) || c.writing && !c.inflight.equal(c.published):
		return "its Lease does not say its view yet"
	case c.publishedAt.IsZero() || c.listedAt.Before(c.publishedAt):
		return "no list since its Lease was written"
	case c.listedAt.Before(c.startedAt.Add(c.settle)):
		return "replicas started within a RetryPeriod of it are counted first"
	}
	for _, p := range c.peers {
		if !p.missing.IsZero() {
			return "the Lease of replica " + p.holder + " (of an older release) is gone from the hub"
		}
	}
	return ""
}

// claimed tells whether a live peer may hold name.
func (c *core) claimed(name string) bool {
	for _, p := range c.peers {
		if p.claims(name, c.rules) {
			return true
		}
	}
	return false
}

// schedule sets when the driver calls tick next.
func (c *core) schedule(now time.Time, e *effects) {
	next := time.Time{}
	soon := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !c.writing {
		soon(c.nextWrite)
	} else {
		soon(c.wroteAt.Add(c.timeout)) // a write past its timeout counts for nothing
	}
	if !c.listing {
		soon(c.nextList)
		for _, p := range c.peers {
			if !p.expired {
				soon(p.firstSeen.Add(p.duration))
			}
		}
	}
	if !c.renewed.IsZero() {
		soon(c.renewed.Add(c.rd))
	}
	for _, ds := range c.retiring {
		for _, d := range ds {
			soon(d.at.Add(c.ld - c.rd))
		}
	}
	if !c.listedAt.IsZero() {
		soon(c.listedAt.Add(c.rd))
	}
	if !c.listing && c.listedAt.Before(c.startedAt.Add(c.settle)) {
		soon(c.startedAt.Add(c.settle)) // the list that ends the settle
	}
	e.next = next
}
