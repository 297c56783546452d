package fleet

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

// The configurations replicas are given: each passes withDefaults.
var modelConfigs = []Shards{
	{LeaseDuration: 1000 * time.Millisecond, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond},
	{LeaseDuration: 1500 * time.Millisecond, RenewDeadline: 1000 * time.Millisecond, RetryPeriod: 100 * time.Millisecond},
	{LeaseDuration: 800 * time.Millisecond, RenewDeadline: 400 * time.Millisecond, RetryPeriod: 80 * time.Millisecond},
}

type modelReplica struct {
	id      string
	core    *shardCore
	cfg     Shards
	rate    float64 // local seconds per real second
	dead    bool
	reborn  bool          // dead, and restarted as a new replica of its identity
	cut     bool          // every request fails at once
	noList  bool          // lists fail at once
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
	releasedFlag bool
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
	log      []string
	quietAt  time.Duration

	// For the schedule tests (shardcore_test.go).
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
	take    shardTake
	since   time.Duration // when it really lost its last owner; -1: it had none before
}

var debugModel = false

var modelEpoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func newShardModel(seed uint64) *shardModel {
	m := &shardModel{rnd: rand.New(rand.NewPCG(seed, 0x5a4d)), hub: map[string]*modelLease{}, faulty: true,
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
func (m *shardModel) addReplicaWith(cfg Shards, rate float64, newer bool) *modelReplica {
	cfg.Config, cfg.Namespace, cfg.Group = nil, "ns", "g"
	r := &modelReplica{id: cfg.Identity, cfg: cfg, rate: rate, timerAt: -1,
		members: map[string]uint64{}, vaults: map[string]map[uint64]bool{}}
	r.core = newShardCore(cfg)
	if newer {
		r.core.rules = coreRules + 1 // a newer release: it stands by while this one's peers run
	}
	m.replicas = append(m.replicas, r)
	for i, s := range m.seats {
		r.core.seatAdded(s, uint64(i+1))
	}
	m.say("%s starts: %v/%v/%v rules %d rate %.4f", r.id, cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod, r.core.rules, r.rate)
	m.deliver(r, "start", func(*shardEffects) {})
	return r
}

// deliver runs an event on r's core, then its step, and applies the effects.
func (m *shardModel) deliver(r *modelReplica, what string, ev func(*shardEffects)) {
	if r.dead {
		return
	}
	if m.now < r.stalled {
		m.at(r.stalled-m.now, "", func() { m.deliver(r, what, ev) })
		return
	}
	var e shardEffects
	ev(&e)
	r.core.step(m.local(r), &e)
	m.apply(r, e)
	if what != "" && what != "tick" {
		m.say("%s: %s", r.id, what)
	}
}

func (m *shardModel) apply(r *modelReplica, e shardEffects) {
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
		m.request(r, func() { // linearized
			if l := m.hub[name]; l != nil && strconv.Itoa(l.rv) == rv {
				delete(m.hub, name)
				m.say("hub: %s deletes stale %s", r.id, name)
			}
		}, func(bool) {})
	}
	r.timerN++
	if !e.next.IsZero() {
		n := r.timerN
		d := realDur(r, e.next.Sub(m.local(r))) + 1
		m.at(max(d, 0), "", func() {
			if n == r.timerN {
				m.deliver(r, "tick", func(*shardEffects) {})
			}
		})
	}
}

// hooks runs a dropped member's vault Close and OnRemove: fast, slow, or
// (OnRemove only) hung for long.
func (m *shardModel) hooks(r *modelReplica, name string, gen uint64) {
	closeIn, removeIn := m.randomHookTimes()
	if m.hookTimes != nil {
		closeIn, removeIn = m.hookTimes(r, name)
	}
	m.at(closeIn, "", func() {
		delete(r.vaults[name], gen)
		m.deliver(r, "vault of "+name+" closed", func(*shardEffects) { r.core.stopped(name, gen) })
	})
	m.at(removeIn, "", func() {
		m.lastRemovedAt[r.id] = m.now
		m.deliver(r, "OnRemove of "+name+" returned", func(*shardEffects) { r.core.removed(name, gen) })
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

func (m *shardModel) randomHookTimes() (closeIn, removeIn time.Duration) {
	closeIn = time.Duration(m.rnd.IntN(20)) * time.Millisecond
	if m.rnd.IntN(10) == 0 {
		closeIn = time.Duration(m.rnd.IntN(300)) * time.Millisecond
	}
	removeIn = time.Duration(m.rnd.IntN(30)) * time.Millisecond
	switch m.rnd.IntN(12) {
	case 0:
		removeIn = time.Duration(m.rnd.IntN(500)) * time.Millisecond
	case 1:
		removeIn = 3 * time.Second // hung, for a while
	}
	return closeIn, removeIn
}

// check fails the run if a replica other than taker owns name.
func (m *shardModel) check(name string, taker *modelReplica) {
	for _, o := range m.replicas {
		if o == taker || o.dead {
			continue
		}
		if _, ok := o.members[name]; ok || len(o.vaults[name]) > 0 {
			panic(fmt.Sprintf("two owners: %s takes %s while %s owns it (member %v, open vaults %v)", taker.id, name, o.id, ok, o.vaults[name]))
		}
	}
}

// request runs a hub operation for r: it lands (lin) after a delay, and
// its answer reaches r after another, or never, or past r's timeout (then r
// sees a failure at the timeout, though the operation may have landed).
func (m *shardModel) request(r *modelReplica, lin func(), answer func(ok bool)) {
	m.requestWithin(r, realDur(r, r.core.timeout), lin, answer)
}

// requestWithin is request with the time left before r gives up on it.
func (m *shardModel) requestWithin(r *modelReplica, timeout time.Duration, lin func(), answer func(ok bool)) {
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
	if r.cut || lin == nil {
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
			if name == leaseName("g", r.id) {
				continue
			}
			snap = append(snap, leaseRecord{name: name, holder: l.holder, rv: strconv.Itoa(l.rv), view: l.content.view,
				readable: true, released: l.content.standby || l.releasedFlag, rules: l.rules, duration: l.duration})
		}
	}
	if r.noList {
		lin = nil
	}
	m.request(r, lin, func(ok bool) {
		end := m.local(r)
		m.deliver(r, "", func(e *shardEffects) {
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
// once when that finds the Lease deleted), or, with no copy, a Get and then
// an Update of what it read, or a Create when it read nothing.
func (m *shardModel) write(r *modelReplica, content leaseContent) {
	start := m.local(r)
	startReal := m.now
	timeout := realDur(r, r.core.timeout)
	name := leaseName("g", r.id)
	sent, fresh := r.cache, r.cache == nil
	if fresh {
		if cur := m.hub[name]; cur != nil { // the Get answers at once; the Update carries what it read
			cp := *cur
			sent = &cp
		}
	}
	report := func(res writeResult) {
		res.start, res.end = start, m.local(r)
		m.deliver(r, "", func(e *shardEffects) {
			if !res.ok {
				r.cache = nil // read it again
			} else if fresh || res.gone || r.core.lifeUID != res.uid {
				res.foundAt = res.end
			}
			r.core.wrote(content, res, e)
		})
	}
	put := func(cur *modelLease) writeResult {
		m.rv++
		cur.rv, cur.content, cur.duration, cur.rules = m.rv, content, r.cfg.LeaseDuration, r.core.rules
		cp := *cur
		r.cache = &cp
		return writeResult{ok: true, uid: strconv.Itoa(cur.uid)}
	}
	create := func(within time.Duration, gone bool) {
		var res writeResult
		m.requestWithin(r, within, func() {
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
	m.request(r, func() {
		cur := m.hub[name]
		switch {
		case cur == nil:
			notFound = true
		case cur.rv == sent.rv:
			res = put(cur)
		}
	}, func(ok bool) {
		if ok && notFound {
			create(timeout-(m.now-startReal), true) // deleted under it: created again within the same timeout
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
	m.scheduleFaults()
	faultsEnd := 20 * time.Second
	m.at(faultsEnd, "faults stop", func() { m.faulty = false; m.quietAt = m.now })
	for m.steps < steps && m.queue.Len() > 0 {
		m.runNext()
		if !m.faulty && m.now > m.quietAt+m.bound() {
			return m.settled()
		}
	}
	return fmt.Errorf("ran out of events (%d run) before the bound after the faults", m.steps)
}

// bound is how long after the faults stop every cluster has an owner:
// a replica joining takes after its coverage, a hung OnRemove (3 s) is
// given up after the budget, and a Lease deleted last costs its replica a
// proof and its peers a LeaseDuration.
func (m *shardModel) bound() time.Duration {
	return 3*time.Second + 2*1500*time.Millisecond + 2*time.Second
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
		switch m.rnd.IntN(6) {
		case 0, 1:
			m.at(at, "", func() {
				names := slices.Sorted(maps.Keys(m.hub))
				if len(names) == 0 {
					return
				}
				if m.rnd.IntN(3) == 0 {
					clear(m.hub)
					m.say("hub: every Lease deleted")
					return
				}
				n := names[m.rnd.IntN(len(names))]
				delete(m.hub, n)
				m.say("hub: Lease %s deleted", n)
			})
		case 2:
			m.at(at, "", func() {
				r := m.replicas[m.rnd.IntN(len(m.replicas))]
				r.stalled = m.now + time.Duration(m.rnd.IntN(100))*time.Millisecond
				m.say("%s stalls until %v", r.id, r.stalled)
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
		}
	}
}

func (m *shardModel) dump() string {
	var b strings.Builder
	for _, r := range m.replicas {
		c := r.core
		fmt.Fprintf(&b, "%s dead=%v rules=%d target=%v standby=%q renewed=%v elig=%v published=%v given=%v listedAt=%v pubAt=%v covered=%v cannot=%q owned=%v retiring=%d\n",
			r.id, r.dead, c.rules, c.target, c.standby, c.renewed.Sub(modelEpoch), c.eligible(m.local(r)), c.published, c.given, c.listedAt.Sub(modelEpoch), c.publishedAt.Sub(modelEpoch), c.coveredSince.Sub(modelEpoch), c.cannotTake(m.local(r)), slices.Sorted(maps.Keys(c.owned)), len(c.retiring))
		for n, p := range c.peers {
			fmt.Fprintf(&b, "   peer %s %s rv=%s exp=%v rel=%v missing=%v view=%v rules=%d\n", n, p.holder, p.rv, p.expired, p.released, !p.missing.IsZero(), p.view, p.rules)
		}
	}
	return b.String()
}
