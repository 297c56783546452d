package shard

import (
	"container/heap"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The model test runs the cores of several replicas against a model of the
// hub that fails in the ways a real one does — a Lease deleted by someone
// else, a reply lost or late (the write still lands), a stale view, a
// replica stalled, killed or joining — with hooks that are fast, slow or
// hung, clocks that run at rates up to 1% apart, and replicas of mixed
// durations and placement rules. After every event it checks that no
// cluster has two owners (a live member, or a vault not yet closed); once
// the faults stop, that every cluster is owned within the bound. It runs
// no goroutine and no timer: a failure names its seed and replays exactly
// (go test -run TestShardModel -shardmodel.seed N -v ./fleet).

var (
	shardModelRuns  = flag.Int("shardmodel.runs", 30, "random schedules TestShardModel runs (make model-shards runs many more)")
	shardModelSeed  = flag.Uint64("shardmodel.seed", 0, "run this one seed only (0: runs seeds 1…runs)")
	shardModelSteps = flag.Int("shardmodel.steps", 200000, "the most events a schedule may run")
)

func TestShardModel(t *testing.T) {
	seeds := make([]uint64, 0, *shardModelRuns)
	if *shardModelSeed != 0 {
		seeds = append(seeds, *shardModelSeed)
	} else {
		for i := range *shardModelRuns {
			seeds = append(seeds, uint64(i+1))
		}
	}
	steps := 0
	start := time.Now()
	for _, seed := range seeds {
		m := newShardModel(seed)
		err := m.run(*shardModelSteps)
		steps += m.steps
		if err != nil {
			t.Fatalf("seed %d: %v\nlast events:\n%s\n%s", seed, err, m.tail(), m.dump())
		}
	}
	t.Logf("%d schedules, %d steps, %.0f steps/s", len(seeds), steps, float64(steps)/time.Since(start).Seconds())
}

// The configurations replicas are given: each passes Check.
// The longest LeaseDuration is four times the shortest, as the package
// doc allows, and their RetryPeriods and budgets differ.
var modelConfigs = []Config{
	{LeaseDuration: 1000 * time.Millisecond, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond},
	{LeaseDuration: 1600 * time.Millisecond, RenewDeadline: 1000 * time.Millisecond, RetryPeriod: 100 * time.Millisecond},
	{LeaseDuration: 800 * time.Millisecond, RenewDeadline: 400 * time.Millisecond, RetryPeriod: 80 * time.Millisecond},
	{LeaseDuration: 400 * time.Millisecond, RenewDeadline: 250 * time.Millisecond, RetryPeriod: 25 * time.Millisecond},
}

type modelReplica struct {
	id      string
	core    *core
	cfg     Config
	rate    float64 // local seconds per real second
	dead    bool
	reborn  bool          // dead, and restarted as a new replica of its identity
	cut     bool          // every request fails at once
	noList  bool          // lists fail at once
	noWrite bool          // writes fail at once
	closed  bool          // closed cleanly (Fleet.Close): its Lease released
	stalled time.Duration // real time until which it does nothing
	timerAt time.Duration // real time of its pending tick; -1: none
	timerN  int           // invalidates older tick events
	cache   *modelLease   // the driver's copy of its Lease (rv, uid)
	// ownership as it really is, not as the core believes it
	members map[string]uint64          // live members by cluster
	vaults  map[string]map[uint64]bool // vaults not yet closed
}

type modelLease struct {
	name, holder string
	rv, uid      int
	content      leaseContent
	duration     time.Duration
	rules        int
	releasedFlag bool          // marked released by a peer that takes its finalizer off
	finalizer    bool          // the package's finalizer is on it
	writer       *modelReplica // the process that last wrote it (its incarnation)
	marked       bool          // deleted while it had the finalizer
}

type modelEvent struct {
	at  time.Duration
	seq int
	do  func()
	say string
}

type eventQueue []*modelEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*modelEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type shardModel struct {
	rnd      *rand.Rand
	now      time.Duration // real time
	queue    eventQueue
	seq      int
	steps    int
	replicas []*modelReplica
	hub      map[string]*modelLease
	rv, uid  int
	seats    []string
	faulty   bool // faults still injected
	hand     bool // a person may take a finalizer off by hand (the doc's exception)
	log      []string
	quietAt  time.Duration
	hooksEnd time.Duration // when the last hook started returns: a slow or hung one is a fault too
	faultEnd time.Duration // when the last fault that may leave a cluster unowned ends
	handAt   time.Duration // when a person last took a finalizer off by hand; -1: never
	overlap  time.Duration // the longest two owners lasted after that (the doc's exception)
	twoSince time.Duration // since when two replicas own a cluster; -1: none do

	// For the schedule tests (core_test.go).
	hookTimes     func(r *modelReplica, name string) (closeIn, removeIn time.Duration) // nil: random
	unownedSince  map[string]time.Duration                                             // real time each cluster lost its last owner
	longest       map[string]time.Duration                                             // the longest each went unowned
	fencedAt      map[string]time.Duration                                             // when each replica last fenced
	lastRemovedAt map[string]time.Duration                                             // when each replica's last OnRemove returned
	takes         []modelTake
}

type modelTake struct {
	replica string
	at      time.Duration
	take    taking
	since   time.Duration // when it really lost its last owner; -1: it had none before
}

var debugModel = false

var modelEpoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func newShardModel(seed uint64) *shardModel {
	m := &shardModel{rnd: rand.New(rand.NewPCG(seed, 0x5a4d)), hub: map[string]*modelLease{}, faulty: true, handAt: -1, twoSince: -1,
		unownedSince: map[string]time.Duration{}, longest: map[string]time.Duration{},
		fencedAt: map[string]time.Duration{}, lastRemovedAt: map[string]time.Duration{}}
	for i := range 10 + m.rnd.IntN(10) {
		m.seats = append(m.seats, fmt.Sprintf("ns/c%02d", i))
	}
	for range 2 + m.rnd.IntN(3) {
		m.addReplica()
	}
	return m
}

func (m *shardModel) say(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("%9.3fs ", m.now.Seconds())+fmt.Sprintf(format, args...))
	if len(m.log) > 400 {
		m.log = m.log[len(m.log)-300:]
	}
}

func (m *shardModel) tail() string { return strings.Join(m.log, "\n") }

func (m *shardModel) at(d time.Duration, say string, do func()) {
	m.seq++
	heap.Push(&m.queue, &modelEvent{at: m.now + d, seq: m.seq, do: do, say: say})
}

// local is r's clock now.
func (m *shardModel) local(r *modelReplica) time.Time {
	return modelEpoch.Add(time.Duration(float64(m.now) * r.rate))
}

// real converts a duration on r's clock to real time.
func realDur(r *modelReplica, d time.Duration) time.Duration {
	return time.Duration(float64(d) / r.rate)
}

func (m *shardModel) addReplica() *modelReplica {
	cfg := modelConfigs[m.rnd.IntN(len(modelConfigs))]
	cfg.Identity = "r" + strconv.Itoa(len(m.replicas))
	return m.addReplicaWith(cfg, 0.995+0.01*m.rnd.Float64(), m.rnd.IntN(8) == 0)
}

// addReplicaWith starts a replica of cfg (Identity set), its clock at rate,
// of newer placement rules when newer.
func (m *shardModel) addReplicaWith(cfg Config, rate float64, newer bool) *modelReplica {
	cfg.Namespace, cfg.Group = "ns", "g"
	r := &modelReplica{id: cfg.Identity, cfg: cfg, rate: rate, timerAt: -1,
		members: map[string]uint64{}, vaults: map[string]map[uint64]bool{}}
	r.core = newCore(cfg)
	if newer {
		r.core.rules = coreRules + 1 // a newer release: it stands by while this one's peers run
	}
	m.replicas = append(m.replicas, r)
	for i, s := range m.seats {
		r.core.seatAdded(s, uint64(i+1))
	}
	m.say("%s starts: %v/%v/%v rules %d rate %.4f", r.id, cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod, r.core.rules, r.rate)
	m.deliver(r, "start", func(*effects) {})
	return r
}

// deliver runs an event on r's core, then its step, and applies the effects.
func (m *shardModel) deliver(r *modelReplica, what string, ev func(*effects)) {
	if r.dead {
		return
	}
	if m.now < r.stalled {
		m.at(r.stalled-m.now, "", func() { m.deliver(r, what, ev) })
		return
	}
	var e effects
	ev(&e)
	r.core.step(m.local(r), &e)
	m.apply(r, e)
	if what != "" && what != "tick" {
		m.say("%s: %s", r.id, what)
	}
}

func (m *shardModel) apply(r *modelReplica, e effects) {
	for _, n := range e.notes {
		if (n.kind == noteJoined || n.kind == noteLeft) && n.peer == r.id {
			panic(fmt.Sprintf("%s notes itself as a peer that joined or left (kind %d)", r.id, n.kind))
		}
		if n.kind == noteFenced {
			m.fencedAt[r.id] = m.now
		}
		if n.kind == noteStandby || n.kind == noteSelfJoined || n.kind == noteFenced {
			m.say("%s note %d %s %d", r.id, n.kind, n.why, n.n)
		}
	}
	for _, d := range e.drops {
		if r.members[d.name] != d.gen {
			panic(fmt.Sprintf("%s drops %s gen %d, holds gen %d", r.id, d.name, d.gen, r.members[d.name]))
		}
		delete(r.members, d.name)
		m.lostOwner(d.name)
		m.say("%s drops %s (%s)", r.id, d.name, d.why)
		m.hooks(r, d.name, d.gen)
	}
	for _, t := range e.takes {
		m.check(t.name, r)
		if len(r.vaults[t.name]) > 0 {
			panic(fmt.Sprintf("%s takes %s again while a vault of its own for it is open: %v", r.id, t.name, r.vaults[t.name]))
		}
		r.members[t.name] = t.gen
		if r.vaults[t.name] == nil {
			r.vaults[t.name] = map[uint64]bool{}
		}
		r.vaults[t.name][t.gen] = true
		since, ok := m.unownedSince[t.name]
		if ok {
			m.longest[t.name] = max(m.longest[t.name], m.now-since)
			delete(m.unownedSince, t.name)
		} else {
			since = -1
		}
		m.takes = append(m.takes, modelTake{replica: r.id, at: m.now, take: t, since: since})
		m.say("%s takes %s", r.id, t.name)
	}
	if e.write != nil {
		m.write(r, *e.write)
	}
	if e.list {
		m.list(r)
	}
	for _, d := range e.deletes {
		name, rv := d.name, d.rv
		var now int
		m.request(r, func() { // the finalizer off, marked released, at rv
			if l := m.hub[name]; l != nil && strconv.Itoa(l.rv) == rv {
				m.rv++
				l.rv, l.finalizer, l.releasedFlag = m.rv, false, true
				now = l.rv
				if l.marked {
					delete(m.hub, name)
				}
				m.say("hub: %s takes the finalizer off stale %s", r.id, name)
			}
		}, func(ok bool) {
			if !ok || now == 0 {
				return
			}
			m.request(r, func() { // then the delete, at that version
				if l := m.hub[name]; l != nil && l.rv == now {
					delete(m.hub, name)
					m.say("hub: %s deletes stale %s", r.id, name)
				}
			}, func(bool) {})
		})
	}
	if e.letGo {
		m.release(r)
	}
	r.timerN++
	if !e.next.IsZero() {
		n := r.timerN
		d := realDur(r, e.next.Sub(m.local(r))) + 1
		m.at(max(d, 0), "", func() {
			if n == r.timerN {
				m.deliver(r, "tick", func(*effects) {})
			}
		})
	}
}

// release is the end of a clean Close: the loop stops, and the Lease is
// marked released, its finalizer taken off, and deleted.
func (m *shardModel) release(r *modelReplica) {
	if len(r.members) > 0 {
		panic(fmt.Sprintf("%s releases its Lease while it owns %v", r.id, slices.Sorted(maps.Keys(r.members))))
	}
	for name, vs := range r.vaults {
		if len(vs) > 0 {
			panic(fmt.Sprintf("%s releases its Lease while a vault of %s may log in", r.id, name))
		}
	}
	r.core.close()
	r.dead, r.closed = true, true
	name := LeaseName("g", r.id)
	var rv int
	m.request(r, func() { // marked released, the finalizer off: only the Lease this process wrote last (its incarnation)
		if l := m.hub[name]; l != nil && l.writer == r {
			m.rv++
			l.rv, l.content, l.finalizer = m.rv, leaseContent{standby: true, free: true}, false
			rv = l.rv
			if l.marked {
				delete(m.hub, name)
			}
			m.say("hub: %s released its Lease", r.id)
		}
	}, func(ok bool) {
		if !ok {
			return
		}
		m.request(r, func() { // and deleted at that version
			if l := m.hub[name]; l != nil && l.rv == rv {
				delete(m.hub, name)
				m.say("hub: %s deleted its released Lease", r.id)
			}
		}, func(bool) {})
	})
	m.say("%s closed", r.id)
}

// hooks runs a dropped member's vault Close and OnRemove: fast, slow, or
// (OnRemove only) hung for long.
func (m *shardModel) hooks(r *modelReplica, name string, gen uint64) {
	closeIn, removeIn := m.randomHookTimes(r)
	if m.hookTimes != nil {
		closeIn, removeIn = m.hookTimes(r, name)
	}
	m.hooksEnd = max(m.hooksEnd, m.now+max(closeIn, removeIn))
	m.at(closeIn, "", func() {
		delete(r.vaults[name], gen)
		m.deliver(r, "vault of "+name+" closed", func(*effects) { r.core.stopped(name, gen) })
	})
	m.at(removeIn, "", func() {
		m.lastRemovedAt[r.id] = m.now
		m.deliver(r, "OnRemove of "+name+" returned", func(*effects) { r.core.removed(name, gen) })
	})
}

// lostOwner records that name has no live member now, if so.
func (m *shardModel) lostOwner(name string) {
	for _, o := range m.replicas {
		if _, ok := o.members[name]; ok && !o.dead {
			return
		}
	}
	if _, ok := m.unownedSince[name]; !ok {
		m.unownedSince[name] = m.now
	}
}

// randomHookTimes draws how long a vault's Close and an OnRemove of r's
// take. A Close takes at most half r's slack (the doc's assumption: the
// slack covers a stall and the handlers' return; stalls take the other
// half); OnRemove is not in the budget.
func (m *shardModel) randomHookTimes(r *modelReplica) (closeIn, removeIn time.Duration) {
	half := int(r.cfg.slack() / 2 / time.Millisecond)
	closeIn = time.Duration(m.rnd.IntN(min(20, half))) * time.Millisecond
	if m.rnd.IntN(10) == 0 {
		closeIn = time.Duration(m.rnd.IntN(half)) * time.Millisecond
	}
	removeIn = time.Duration(m.rnd.IntN(30)) * time.Millisecond
	switch m.rnd.IntN(12) {
	case 0:
		removeIn = time.Duration(m.rnd.IntN(500)) * time.Millisecond
	case 1:
		if m.faulty {
			removeIn = 3 * time.Second // hung, for a while
		}
	}
	return closeIn, removeIn
}

// check fails the run if a replica other than taker owns name, but
// after a finalizer taken off by hand (the doc's exception), where it
// counts two owners from then on in overlap (see twoOwners).
func (m *shardModel) check(name string, taker *modelReplica) {
	for _, o := range m.replicas {
		if o == taker || o.dead {
			continue
		}
		if _, ok := o.members[name]; ok || len(o.vaults[name]) > 0 {
			if m.handAt >= 0 {
				if m.twoSince < 0 {
					m.twoSince = m.now
				}
				m.say("two owners after a finalizer taken off by hand: %s takes %s while %s owns it", taker.id, name, o.id)
				continue
			}
			panic(fmt.Sprintf("two owners: %s takes %s while %s owns it (member %v, open vaults %v)", taker.id, name, o.id, ok, o.vaults[name]))
		}
	}
}

// twoOwners tells whether a cluster has two owners now (members or open
// vaults of two live replicas), and tracks overlap.
func (m *shardModel) twoOwners() bool {
	if m.twoSince < 0 {
		return false
	}
	for _, s := range m.seats {
		n := 0
		for _, r := range m.replicas {
			if _, ok := r.members[s]; (ok || len(r.vaults[s]) > 0) && !r.dead {
				n++
			}
		}
		if n > 1 {
			m.overlap = max(m.overlap, m.now-m.twoSince)
			return true
		}
	}
	m.twoSince = -1
	return false
}

// request runs a hub operation for r: it lands (lin) after a delay, and
// its answer reaches r after another, or never, or past r's timeout (then r
// sees a failure at the timeout, though the operation may have landed).
func (m *shardModel) request(r *modelReplica, lin func(), answer func(ok bool)) {
	m.requestWithin(r, realDur(r, r.core.timeout), lin, answer)
}

// requestWithin is request with the time left before r gives up on it.
func (m *shardModel) requestWithin(r *modelReplica, timeout time.Duration, lin func(), answer func(ok bool)) {
	m.requestOf(r, timeout, false, lin, answer)
}

// requestOf is requestWithin for a write of r's Lease when isWrite.
func (m *shardModel) requestOf(r *modelReplica, timeout time.Duration, isWrite bool, lin func(), answer func(ok bool)) {
	fast := func() time.Duration { return time.Duration(1+m.rnd.IntN(15)) * time.Millisecond }
	landIn, replyIn := fast(), fast()
	lost := false
	if m.faulty {
		switch m.rnd.IntN(20) {
		case 0:
			landIn += time.Duration(m.rnd.IntN(600)) * time.Millisecond
		case 1:
			replyIn += time.Duration(m.rnd.IntN(600)) * time.Millisecond
		case 2:
			lost = true
		case 3:
			lin = nil // refused: never lands
		}
	}
	if r.cut || lin == nil || r.noWrite && isWrite {
		lin, landIn, replyIn = nil, 0, time.Millisecond // refused at once
	}
	landed := false
	if lin != nil {
		m.at(landIn, "", func() { lin(); landed = true })
	}
	if lost || landIn+replyIn > timeout || lin == nil {
		m.at(max(0, min(timeout, landIn+replyIn)), "", func() { answer(false) })
		return
	}
	m.at(landIn+replyIn, "", func() { answer(landed) })
}

func (m *shardModel) list(r *modelReplica) {
	start := m.local(r)
	var snap []leaseRecord
	lin := func() {
		snap = nil
		for _, name := range slices.Sorted(maps.Keys(m.hub)) {
			l := m.hub[name]
			if name == LeaseName("g", r.id) {
				continue
			}
			snap = append(snap, leaseRecord{name: name, holder: l.holder, rv: strconv.Itoa(l.rv), view: l.content.view,
				readable: true, released: l.content.standby || l.releasedFlag, rules: l.rules, duration: l.duration,
				guarded: l.finalizer, marked: l.marked})
		}
	}
	if r.noList {
		lin = nil
	}
	m.request(r, lin, func(ok bool) {
		end := m.local(r)
		m.deliver(r, "", func(e *effects) {
			if ok {
				r.core.listed(start, end, snap, e)
				if debugModel {
					var ps []string
					for _, p := range r.core.peers {
						ps = append(ps, fmt.Sprintf("%s@%s exp=%v miss=%v rel=%v fs=%v", p.holder, p.rv, p.expired, !p.missing.IsZero(), p.released, p.firstSeen.Sub(modelEpoch)))
					}
					slices.Sort(ps)
					m.say("%s listed (start %v): %v", r.id, start.Sub(modelEpoch), ps)
				}
			} else {
				r.core.listFailedAt(start, e)
			}
		})
	})
}

// write is the driver's write: an Update of its copy (and a Create at
// once when that finds the Lease gone), or, with no copy, a Get and then an
// Update of what it read, or a Create when it read nothing. It puts the
// finalizer on a Lease not marked for deletion, and takes it off when
// content is free (a marked Lease then goes).
func (m *shardModel) write(r *modelReplica, content leaseContent) {
	start := m.local(r)
	startReal := m.now
	timeout := realDur(r, r.core.timeout)
	name := LeaseName("g", r.id)
	sent, fresh := r.cache, r.cache == nil
	if fresh {
		if cur := m.hub[name]; cur != nil { // the Get answers at once; the Update carries what it read
			cp := *cur
			sent = &cp
		}
	}
	report := func(res writeResult) {
		res.start, res.end = start, m.local(r)
		m.deliver(r, "", func(e *effects) {
			if !res.ok || content.free {
				r.cache = nil // read it again
			}
			r.core.wrote(content, res, e)
		})
	}
	put := func(cur *modelLease) writeResult {
		m.rv++
		cur.rv, cur.content, cur.duration, cur.rules = m.rv, content, r.cfg.LeaseDuration, r.core.rules
		cur.releasedFlag = false // the writer's content says whether it is released
		cur.writer = r
		switch {
		case content.free:
			cur.finalizer = false
			if cur.marked {
				delete(m.hub, name)
				m.say("hub: %s let its marked Lease go", r.id)
			}
		case !cur.marked:
			cur.finalizer = true
		}
		cp := *cur
		r.cache = &cp
		return writeResult{ok: true, uid: strconv.Itoa(cur.uid), marked: cur.marked && !content.free}
	}
	create := func(within time.Duration, gone bool) {
		var res writeResult
		m.requestOf(r, within, true, func() {
			if content.free {
				res = writeResult{ok: true} // gone already
				return
			}
			if m.hub[name] != nil {
				return // AlreadyExists
			}
			m.uid++
			cur := &modelLease{name: name, holder: r.id, uid: m.uid}
			m.hub[name] = cur
			res = put(cur)
		}, func(ok bool) {
			res.ok = ok && res.ok
			res.gone = gone
			report(res)
		})
	}
	if sent == nil {
		create(timeout, false)
		return
	}
	var res writeResult
	notFound := false
	m.requestOf(r, timeout, true, func() {
		cur := m.hub[name]
		switch {
		case cur == nil:
			notFound = true
		case cur.rv == sent.rv:
			res = put(cur)
		}
	}, func(ok bool) {
		if ok && notFound && !r.dead {
			// Gone under it: created again within the same timeout (not
			// by a process that has stopped: its request's context is done).
			create(timeout-(m.now-startReal), true)
			return
		}
		res.ok = ok && res.ok
		report(res)
	})
}

func (m *shardModel) run(steps int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	m.hand = m.rnd.IntN(3) == 0
	m.scheduleFaults()
	faultsEnd := 20 * time.Second
	m.at(faultsEnd, "faults stop", func() {
		m.faulty, m.quietAt = false, m.now
		for _, r := range m.replicas {
			r.cut, r.noList, r.noWrite = false, false, false
		}
	})
	for m.steps < steps && m.queue.Len() > 0 {
		m.runNext()
		if m.twoOwners() && m.overlap > m.handBound() {
			return fmt.Errorf("after a finalizer taken off by hand, two owners for %v, past the doc's bound %v", m.overlap, m.handBound())
		}
		if err := m.orphanedTooLong(); err != nil {
			return err
		}
		if quiet := max(m.quietAt, m.hooksEnd); !m.faulty && m.now > quiet+m.bound() {
			if err := m.settled(); err != nil {
				return err
			}
			if m.now > quiet+m.bound()+3*time.Second {
				return nil
			}
		}
	}
	return fmt.Errorf("ran out of events (%d run) before the bound after the faults", m.steps)
}

// The bounds the package doc states, at the model's longest durations.
var (
	modelMaxLD      = 1600 * time.Millisecond
	modelMaxRD      = 1000 * time.Millisecond
	modelMaxRP      = 100 * time.Millisecond
	modelMaxTimeout = 150 * time.Millisecond // (LeaseDuration − RenewDeadline)/4
	modelMaxClose   = 212 * time.Millisecond // the slowest vault Close the model runs: half the slack of 1600/1000 ms
)

// bound is how long after the faults stop every cluster has an owner, as
// the doc states it: a killed replica's clusters are taken within
// LeaseDuration + 2×RetryPeriod, plus the requests' time and the vaults'
// Close of whoever let them go.
func (m *shardModel) bound() time.Duration {
	return modelMaxLD + 2*modelMaxRP + 2*modelMaxTimeout + modelMaxClose
}

// handBound is how long two replicas may own a cluster after a person
// took a Lease's finalizer off by hand (the doc's exception): until the
// holder fences, at its next write if it can reach the hub, at
// RenewDeadline if not, and its vaults close.
func (m *shardModel) handBound() time.Duration {
	return modelMaxRD + modelMaxRP + modelMaxTimeout + modelMaxClose
}

// orphanedTooLong fails once a cluster has had no owner for longer than
// the bound, counted from when it lost its owner or from the end of the
// last fault that may keep it unowned, whichever is later: checked at every
// step, faults or not.
func (m *shardModel) orphanedTooLong() error {
	if !m.live() {
		return nil
	}
	for _, name := range m.seats {
		since, ok := m.unownedSince[name]
		if !ok {
			if !m.ownedNow(name) {
				m.unownedSince[name] = m.now // never owned yet: since now, or since the start
			}
			continue
		}
		from := max(since, m.faultEnd, m.hooksEnd)
		if m.now-from > m.bound()+m.joinBound() {
			return fmt.Errorf("%s has had no owner since %v (the last fault ended at %v, the last hook at %v): %v, past the bound %v", name, since, m.faultEnd, m.hooksEnd, m.now-since, m.bound()+m.joinBound())
		}
	}
	return nil
}

// live tells whether a replica that may own clusters runs: the newest
// rules stand by while an older runs, and every replica may be gone.
func (m *shardModel) live() bool {
	for _, r := range m.replicas {
		if !r.dead {
			return true
		}
	}
	return false
}

func (m *shardModel) ownedNow(name string) bool {
	for _, r := range m.replicas {
		if _, ok := r.members[name]; ok && !r.dead {
			return true
		}
	}
	return false
}

// joinBound is what a replica that just started adds: its settle, and a
// write and a list.
func (m *shardModel) joinBound() time.Duration {
	return modelMaxRP + modelMaxRP/4 + 2*modelMaxTimeout
}

// settled checks that every cluster has one owner among the live replicas.
func (m *shardModel) settled() error {
	var orphans []string
	for _, s := range m.seats {
		n := 0
		for _, r := range m.replicas {
			if _, ok := r.members[s]; ok && !r.dead {
				n++
			}
		}
		if n != 1 {
			orphans = append(orphans, fmt.Sprintf("%s:%d", s, n))
		}
	}
	if len(orphans) > 0 {
		return fmt.Errorf("%v after the faults stopped, clusters with other than one owner: %v", m.bound(), orphans)
	}
	// Every live replica's Lease stands, with the finalizer, and none is
	// left marked for deletion: a replica lets a marked Lease go.
	for _, r := range m.replicas {
		l := m.hub[LeaseName("g", r.id)]
		switch {
		case r.dead:
		case l == nil:
			return fmt.Errorf("%v after the faults stopped, %s has no Lease", m.bound(), r.id)
		case l.marked || !l.finalizer:
			return fmt.Errorf("%v after the faults stopped, %s's Lease is marked %v, has the finalizer %v", m.bound(), r.id, l.marked, l.finalizer)
		}
	}
	return nil
}

// runNext runs the earliest event, its time now.
func (m *shardModel) runNext() {
	ev := heap.Pop(&m.queue).(*modelEvent)
	m.now = ev.at
	if ev.say != "" {
		m.say("%s", ev.say)
	}
	ev.do()
	m.steps++
}

// kill ends r's process: its members and vaults with it.
func (m *shardModel) kill(r *modelReplica) {
	m.faultEnd = max(m.faultEnd, m.now)
	r.dead = true
	names := slices.Collect(maps.Keys(r.members))
	clear(r.members)
	clear(r.vaults)
	for _, n := range names {
		m.lostOwner(n)
	}
	m.say("%s killed", r.id)
}

// runUntil runs the events up to real time end, failing on two owners.
func (m *shardModel) runUntil(end time.Duration) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	for m.queue.Len() > 0 && m.queue[0].at <= end {
		m.runNext()
	}
	m.now = end
	return nil
}

// owners returns each cluster's live members' replicas.
func (m *shardModel) owners() map[string][]string {
	out := map[string][]string{}
	for _, s := range m.seats {
		out[s] = nil
		for _, r := range m.replicas {
			if _, ok := r.members[s]; ok && !r.dead {
				out[s] = append(out[s], r.id)
			}
		}
	}
	return out
}

// scheduleFaults plans the faults of the first 20 s.
func (m *shardModel) scheduleFaults() {
	for range 3 + m.rnd.IntN(8) {
		at := time.Duration(m.rnd.IntN(19000)) * time.Millisecond
		switch m.rnd.IntN(10) {
		case 0, 1:
			m.at(at, "", func() {
				names := slices.Sorted(maps.Keys(m.hub))
				if len(names) == 0 {
					return
				}
				if m.rnd.IntN(3) == 0 {
					for _, n := range names {
						m.deleteLease(n)
					}
					m.say("hub: every Lease deleted")
					return
				}
				n := names[m.rnd.IntN(len(names))]
				m.deleteLease(n)
				m.say("hub: Lease %s deleted", n)
			})
		case 2:
			m.at(at, "", func() {
				r := m.replicas[m.rnd.IntN(len(m.replicas))]
				r.stalled = m.now + time.Duration(m.rnd.IntN(int(r.cfg.slack()/2/time.Millisecond)))*time.Millisecond
				m.say("%s stalls until %v", r.id, r.stalled)
				m.faultEnd = max(m.faultEnd, r.stalled)
			})
		case 3:
			m.at(at, "", func() {
				live := 0
				for _, r := range m.replicas {
					if !r.dead {
						live++
					}
				}
				if live < 2 {
					return
				}
				r := m.replicas[m.rnd.IntN(len(m.replicas))]
				if r.dead {
					return
				}
				m.kill(r)
			})
		case 4:
			m.at(at, "", func() {
				if len(m.replicas) < 6 {
					m.addReplica()
				}
			})
		case 5:
			// kill -9 and a restart: a new process of the same identity,
			// whose Lease the old one left behind.
			m.at(at, "", func() {
				for _, r := range m.replicas {
					if r.dead && !r.reborn {
						r.reborn = true
						m.say("%s restarts", r.id)
						m.addReplicaWith(r.cfg, r.rate, r.core.rules != coreRules)
						return
					}
				}
			})
		case 6:
			// Writes alone, or lists alone, fail for a while.
			m.at(at, "", func() {
				r := m.replicas[m.rnd.IntN(len(m.replicas))]
				d := time.Duration(m.rnd.IntN(2500)) * time.Millisecond
				writes := m.rnd.IntN(2) == 0
				if writes {
					r.noWrite = true
				} else {
					r.noList = true
				}
				m.outage(r, d)
				m.say("%s: its %s fail for %v", r.id, map[bool]string{true: "writes", false: "lists"}[writes], d)
				m.at(d, "", func() { r.noWrite, r.noList = false, false })
			})
		case 7:
			// Cut from the hub altogether for a while.
			m.at(at, "", func() {
				r := m.replicas[m.rnd.IntN(len(m.replicas))]
				d := time.Duration(m.rnd.IntN(3000)) * time.Millisecond
				r.cut = true
				m.outage(r, d)
				m.say("%s is cut from the hub for %v", r.id, d)
				m.at(d, "", func() { r.cut = false })
			})
		case 8:
			// Fleet.Close: a clean stop, and a new replica in its place.
			m.at(at, "", func() {
				r := m.replicas[m.rnd.IntN(len(m.replicas))]
				if r.dead {
					return
				}
				m.closeReplica(r)
				if len(m.replicas) < 7 {
					m.addReplica()
				}
			})
		case 9:
			if m.hand {
				// The doc's exception: a person takes the finalizer off a
				// Lease by hand (a marked one then goes).
				m.at(at, "", func() {
					names := slices.Sorted(maps.Keys(m.hub))
					if len(names) == 0 {
						return
					}
					n := names[m.rnd.IntN(len(names))]
					l := m.hub[n]
					l.finalizer = false
					m.rv++
					l.rv = m.rv
					if l.marked {
						delete(m.hub, n)
					}
					m.handAt = m.now
					m.faultEnd = max(m.faultEnd, m.now)
					m.say("hub: the finalizer of %s taken off by hand", n)
				})
			}
		}
	}
}

// closeReplica is Fleet.Close on r: every member's context ends, its
// vault's Close and OnRemove beside, and the Lease is released once no
// vault may log in.
func (m *shardModel) closeReplica(r *modelReplica) {
	m.deliver(r, "Close", func(*effects) {
		r.core.closeDown()
		m.faultEnd = max(m.faultEnd, m.now)
		for i, name := range m.seats {
			if gen, ok := r.members[name]; ok {
				delete(r.members, name)
				m.lostOwner(name)
				r.core.seatGone(name, uint64(i+1), m.local(r))
				r.core.seatAdded(name, uint64(i+1)) // the seat stays: only this replica closes
				m.hooks(r, name, gen)
			}
		}
	})
}

// outage records that r cannot reach the hub (or lists, or writes) for
// d: a fault that may leave clusters unowned for its length (a peer that
// dies meanwhile is expired only once r has seen its Lease unchanged for
// its duration).
func (m *shardModel) outage(r *modelReplica, d time.Duration) {
	m.faultEnd = max(m.faultEnd, m.now+d)
}

// deleteLease deletes the Lease name as the API server does: marked while
// it has the finalizer.
func (m *shardModel) deleteLease(name string) {
	m.faultEnd = max(m.faultEnd, m.now)
	l := m.hub[name]
	if !l.finalizer {
		delete(m.hub, name)
		return
	}
	if !l.marked {
		l.marked = true
		m.rv++
		l.rv = m.rv
	}
}

func (m *shardModel) dump() string {
	var b strings.Builder
	for _, r := range m.replicas {
		c := r.core
		fmt.Fprintf(&b, "%s dead=%v rules=%d target=%v standby=%q renewed=%v elig=%v published=%v given=%v listedAt=%v pubAt=%v started=%v cannot=%q owned=%v retiring=%d\n",
			r.id, r.dead, c.rules, c.target, c.standby, c.renewed.Sub(modelEpoch), c.eligible(m.local(r)), c.published, c.given, c.listedAt.Sub(modelEpoch), c.publishedAt.Sub(modelEpoch), c.startedAt.Sub(modelEpoch), c.cannotTake(m.local(r)), slices.Sorted(maps.Keys(c.owned)), len(c.retiring))
		for n, p := range c.peers {
			fmt.Fprintf(&b, "   peer %s %s rv=%s exp=%v rel=%v missing=%v view=%v rules=%d\n", n, p.holder, p.rv, p.expired, p.released, !p.missing.IsZero(), p.view, p.rules)
		}
	}
	return b.String()
}
