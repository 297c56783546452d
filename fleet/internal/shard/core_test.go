package shard

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

// The four schedules that outside tests found giving a cluster two owners
// or none, each on the model's hub and clocks (model_test.go) with no
// fault but the one named: deterministic, and checked for two owners at
// every take. integration/shards_test.go runs the first against a real API
// server.

// quietModel is a model with clusters and no replica, whose hub answers
// every request within 16 ms.
func quietModel(clusters int) *shardModel {
	m := newShardModel(1)
	m.replicas, m.queue, m.seats = nil, nil, nil
	m.faulty = false
	for i := range clusters {
		m.seats = append(m.seats, fmt.Sprintf("ns/c%02d", i))
	}
	return m
}

var shortShards = Config{LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}

func (m *shardModel) start(id string, sh Config) *modelReplica {
	sh.Identity = id
	return m.addReplicaWith(sh, 1, false)
}

// mustRun runs the model to end, failing t on two owners.
func mustRun(t *testing.T, m *shardModel, end time.Duration) {
	t.Helper()
	if err := m.runUntil(end); err != nil {
		t.Fatalf("%v\n%s", err, m.tail())
	}
}

// deleteAll deletes every Lease on the hub, as kubectl delete leases --all.
func (m *shardModel) deleteAll() {
	for _, n := range slices.Sorted(maps.Keys(m.hub)) {
		m.deleteLease(n)
	}
}

// ownedOnce fails t unless every cluster has one owner.
func ownedOnce(t *testing.T, m *shardModel, when string) map[string]string {
	t.Helper()
	owner := map[string]string{}
	for name, ids := range m.owners() {
		if len(ids) != 1 {
			t.Fatalf("%s: cluster %s is owned by %v\n%s", when, name, ids, m.tail())
		}
		owner[name] = ids[0]
	}
	return owner
}

// 1. Someone deletes the group's Leases (an operator's reset) while a
// replica cannot see them: a new one, or one whose lists failed for longer
// than LeaseDuration. The finalizer keeps each Lease, marked, until its
// holder has given its clusters up (or, cut from the hub, until its peers
// expire it), so every replica sees every Lease that may claim a cluster.
func TestShardScheduleDeletedLeasesHideLiveReplicas(t *testing.T) {
	t.Run("a new replica", func(t *testing.T) {
		m := quietModel(20)
		m.start("a", shortShards)
		m.start("b", shortShards)
		mustRun(t, m, 5*time.Second)
		ownedOnce(t, m, "before")
		m.at(0, "every Lease deleted", m.deleteAll)
		m.at(time.Millisecond, "", func() { m.start("c", shortShards) })
		mustRun(t, m, 15*time.Second)
		owner := ownedOnce(t, m, "after")
		if !slices.Contains(slices.Collect(maps.Values(owner)), "c") {
			t.Errorf("the new replica took no cluster: %v", owner)
		}
	})
	t.Run("a new replica, the live ones cut from the hub", func(t *testing.T) {
		m := quietModel(20)
		a := m.start("a", shortShards)
		b := m.start("b", shortShards)
		mustRun(t, m, 5*time.Second)
		ownedOnce(t, m, "before")
		m.at(0, "every Lease deleted; a and b cut", func() { m.deleteAll(); a.cut, b.cut = true, true })
		m.at(time.Millisecond, "", func() { m.start("c", shortShards) })
		mustRun(t, m, 15*time.Second)
		if owner := ownedOnce(t, m, "after"); owner["ns/c00"] != "c" {
			t.Errorf("ns/c00 owned by %s, want the one replica left", owner["ns/c00"])
		}
	})
	t.Run("a known replica's, while it is cut from the hub", func(t *testing.T) {
		m := quietModel(20)
		a := m.start("a", shortShards)
		m.start("b", shortShards)
		mustRun(t, m, 5*time.Second)
		ownedOnce(t, m, "before")
		m.at(0, "a's Lease deleted; a cut", func() { m.deleteLease(LeaseName("g", "a")); a.cut = true })
		mustRun(t, m, 10*time.Second)
		if owner := ownedOnce(t, m, "after"); owner["ns/c01"] != "b" {
			t.Errorf("ns/c01 owned by %s, want the one replica left", owner["ns/c01"])
		}
	})
	t.Run("a replica whose lists failed", func(t *testing.T) {
		m := quietModel(20)
		m.start("a", shortShards)
		m.start("b", shortShards)
		c := m.start("c", shortShards)
		mustRun(t, m, 5*time.Second)
		ownedOnce(t, m, "before")
		m.at(0, "c cannot list", func() { c.noList = true })
		m.at(1500*time.Millisecond, "the Leases of a and b deleted; c lists again", func() {
			m.deleteLease(LeaseName("g", "a"))
			m.deleteLease(LeaseName("g", "b"))
			c.noList = false
		})
		mustRun(t, m, 15*time.Second)
		ownedOnce(t, m, "after")
	})
}

// 2. Replicas of different durations, as in a rolling change of Shards: a
// peer's Lease expires on the duration its holder published, not on the
// observer's, so the short one never takes from the long one while it
// holds; and with no fault nothing moves.
func TestShardScheduleMixedDurations(t *testing.T) {
	long := Config{LeaseDuration: 3 * time.Second, RenewDeadline: 2400 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
	m := quietModel(20)
	a := m.start("a", long)
	m.start("b", shortShards)
	mustRun(t, m, 8*time.Second)
	before := ownedOnce(t, m, "settled")
	takes := len(m.takes)
	mustRun(t, m, 14*time.Second)
	if n := len(m.takes) - takes; n > 0 {
		t.Fatalf("%d clusters moved with no fault: the durations' difference makes them flap\n%s", n, m.tail())
	}
	cut := m.now
	m.at(0, "a is cut from the hub", func() { a.cut = true })
	mustRun(t, m, cut+long.LeaseDuration+2*long.RetryPeriod+100*time.Millisecond)
	after := ownedOnce(t, m, "after a was cut")
	for name, was := range before {
		if was == "a" && after[name] != "b" {
			t.Errorf("%s: owned by %s after a was cut, want b", name, after[name])
		}
	}
	if m.fencedAt["a"] == 0 {
		t.Fatal("a never gave its clusters up")
	}
	for _, tk := range m.takes[takes:] {
		if tk.replica == "b" && tk.at < m.fencedAt["a"] {
			t.Errorf("b took %s at %v, before a gave it up at %v", tk.take.name, tk.at, m.fencedAt["a"])
		}
	}
}

// 3. A replica cut past RenewDeadline with 36 clusters and an OnRemove of
// 100 ms each: the fence ends their contexts and starts their OnRemoves
// and their vaults' Close together, so that every vault has closed (the
// two-owner check counts an open vault as owning) long before a peer
// takes them, and the OnRemoves all return within about one of them.
func TestShardScheduleSlowOnRemoveInTheFence(t *testing.T) {
	m := quietModel(36)
	m.hookTimes = func(*modelReplica, string) (time.Duration, time.Duration) {
		return time.Millisecond, 100 * time.Millisecond
	}
	a := m.start("a", shortShards)
	m.start("b", shortShards)
	mustRun(t, m, 5*time.Second)
	ownedOnce(t, m, "before")
	m.at(0, "a is cut from the hub", func() { a.cut = true })
	mustRun(t, m, 8*time.Second)
	ownedOnce(t, m, "after")
	fenced, removed := m.fencedAt["a"], m.lastRemovedAt["a"]
	if fenced == 0 || removed < fenced || removed-fenced > 150*time.Millisecond {
		t.Errorf("a fenced at %v and its last OnRemove returned at %v: want them all within 150 ms", fenced, removed)
	}
	for _, tk := range m.takes {
		if tk.replica == "b" && tk.at > fenced && tk.at < removed {
			t.Errorf("b took %s at %v while a's OnRemoves ran (until %v)", tk.take.name, tk.at, removed)
		}
	}
}

// 4. An outage longer than RenewDeadline and shorter than LeaseDuration:
// the replica fences, its renewals resume, and its share is owned again
// within LeaseDuration + 2×RetryPeriod of the fence — by itself once its
// OnRemoves returned, or, while one hangs, by its peers, which it lets
// have the share. The metric and the log say who held what, and since when.
func TestShardScheduleOrphanAfterAShortOutage(t *testing.T) {
	bound := shortShards.LeaseDuration + 2*shortShards.RetryPeriod
	for _, hang := range []time.Duration{100 * time.Millisecond, time.Hour} {
		t.Run(fmt.Sprint("OnRemove ", hang), func(t *testing.T) {
			m := quietModel(20)
			a := m.start("a", shortShards)
			m.start("b", shortShards)
			mustRun(t, m, 5*time.Second)
			before := ownedOnce(t, m, "before")
			m.hookTimes = func(r *modelReplica, _ string) (time.Duration, time.Duration) {
				if r == a {
					return time.Millisecond, hang
				}
				return time.Millisecond, time.Millisecond
			}
			m.at(0, "a is cut from the hub", func() { a.cut = true })
			m.at(800*time.Millisecond, "a reaches the hub again", func() { a.cut = false })
			mustRun(t, m, 10*time.Second)
			ownedOnce(t, m, "after")
			for name, was := range before {
				if was == "a" && m.longest[name] > bound {
					t.Errorf("%s had no owner for %v, past LeaseDuration + 2×RetryPeriod (%v)", name, m.longest[name], bound)
				}
			}
			fenced := m.fencedAt["a"]
			if fenced == 0 {
				t.Fatal("a never fenced")
			}
			held := map[string]string{} // the last replica that took each cluster
			for _, tk := range m.takes {
				if tk.at > fenced {
					if from := tk.take.lost.from; from != held[tk.take.name] {
						t.Errorf("%s took %s from %q, which did not hold it last (%q did)", tk.replica, tk.take.name, from, held[tk.take.name])
					}
					if since := tk.take.lost.since.Sub(modelEpoch); since > tk.since+time.Millisecond {
						t.Errorf("%s took %s, unowned since %v by its count, really since %v: the metric under-reports", tk.replica, tk.take.name, since, tk.since)
					}
				}
				held[tk.take.name] = tk.replica
			}
		})
	}
}

func coreOf(id string) *core {
	cfg := Config{Identity: id, LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
	return newCore(cfg)
}

// A write that fails at once (hub refuses: RBAC, webhook, a duplicate
// identity's Lease found by the Get) must be retried after RetryPeriod,
// not at once: the log line says "retrying every RetryPeriod".
func TestCoreRetriesAFailedWriteAfterRetryPeriod(t *testing.T) {
	c := coreOf("a")
	now := modelEpoch
	var e effects
	c.step(now, &e)
	if e.write == nil {
		t.Fatal("first step wrote nothing")
	}
	writes := 1
	for i := range 50 {
		at := now.Add(time.Duration(i+1) * time.Millisecond) // each failure answers within 1 ms
		content := *e.write
		e = effects{}
		c.wrote(content, writeResult{start: at.Add(-time.Millisecond), end: at}, &e)
		c.step(at, &e)
		if e.write == nil {
			break
		}
		writes++
	}
	if writes > 2 {
		t.Errorf("%d writes within 50 ms after writes that fail at once (RetryPeriod 100 ms): a busy loop against the hub", writes)
	}
}

// soloRun drives c alone on a hub that answers every request in 1 ms,
// from *now for d, the hub holding others (peers' Leases) besides c's own;
// it returns the clusters c took.
func soloRun(c *core, now *time.Time, d time.Duration, others func() []leaseRecord) []string {
	var took []string
	end := now.Add(d)
	uid := "uid-a"
	for now.Before(end) {
		var e effects
		c.step(*now, &e)
		for _, t := range e.takes {
			took = append(took, t.name)
		}
		at := *now
		*now = now.Add(time.Millisecond)
		if e.write != nil {
			var e2 effects
			c.wrote(*e.write, writeResult{start: at, end: *now, ok: true, uid: uid}, &e2)
		}
		if e.list {
			var e2 effects
			c.listed(at, *now, others(), &e2)
		}
		if e.write == nil && !e.list {
			*now = now.Add(9 * time.Millisecond)
		}
	}
	return took
}

// A peer's Lease says its duration, and the core believes any: a Lease
// with "1000h" in its lease-duration annotation (a misconfigured replica,
// or garbage), of an older release (no finalizer), released and then
// deleted, would hold up every take of this replica for 1000 h ("the Lease
// of replica z is gone from the hub").
func TestCoreBoundsAPeersDuration(t *testing.T) {
	c := coreOf("a")
	c.seatAdded("ns/c00", 1)
	now := modelEpoch
	bogus := leaseRecord{name: "g-bogus", holder: "z", rv: "1", view: []string{}, readable: true, released: true, rules: coreRules, duration: 1000 * time.Hour}
	present := true
	others := func() []leaseRecord {
		if present {
			return []leaseRecord{bogus}
		}
		return nil
	}
	soloRun(c, &now, 100*time.Millisecond, others)
	present = false // deleted by someone
	within := maxPeerDuration(c.ld) + c.settle + time.Second
	took := soloRun(c, &now, within, others)
	if len(took) == 0 {
		t.Errorf("alone, with every request answered, this replica took nothing in %v (LeaseDuration 1 s): %s", within, c.cannotTake(now))
	}
}

// R58-4. The write that takes the finalizer off a marked Lease lands but
// its answer is lost (a timeout). The next write finds no Lease, creates
// one, and the core, seeing a new UID, "fences": it logs at INFO that its
// Lease "was replaced under it: its peers may take its clusters", though
// it had let that Lease go itself and held nothing.
func TestCoreLostAnswerToTheFreeWriteIsNoFence(t *testing.T) {
	sh := shortShards
	sh.Identity = "a"
	c := newCore(sh)
	c.seatAdded("ns/c00", 1)
	now := modelEpoch
	ms := time.Millisecond
	var fenced []string
	// step runs the core at now, answers its write with answer and its
	// list with no peer, each 1 ms later, and steps again.
	step := func(answer func(leaseContent) writeResult) {
		var e effects
		c.step(now, &e)
		for len(e.drops) > 0 { // vaults close at once
			for _, d := range e.drops {
				c.stopped(d.name, d.gen)
				c.removed(d.name, d.gen)
			}
			e.drops = nil
		}
		write, list := e.write, e.list
		for _, n := range e.notes {
			if n.kind == noteFenced {
				fenced = append(fenced, n.why)
			}
		}
		now = now.Add(ms)
		var e2 effects
		if write != nil {
			r := answer(*write)
			r.start, r.end = now.Add(-ms), now
			c.wrote(*write, r, &e2)
		}
		if list {
			c.listed(now.Add(-ms), now, nil, &e2)
		}
		for _, n := range e2.notes {
			if n.kind == noteFenced {
				fenced = append(fenced, n.why)
			}
		}
	}
	ok := func(uid string, marked bool) func(leaseContent) writeResult {
		return func(leaseContent) writeResult { return writeResult{ok: true, uid: uid, marked: marked} }
	}
	// Start and take.
	for range 40 {
		step(ok("u1", false))
		now = now.Add(sh.RetryPeriod / 4)
	}
	if len(c.owned) != 1 {
		t.Fatalf("a owns %v, want ns/c00", c.owned)
	}
	// Deleted: the next renewals find the Lease marked; a stands by.
	for range 20 {
		done := false
		step(func(w leaseContent) writeResult {
			if w.free {
				done = true
				return writeResult{} // landed; its answer lost
			}
			return writeResult{ok: true, uid: "u1", marked: true}
		})
		now = now.Add(sh.RetryPeriod / 4)
		if done {
			break
		}
	}
	if len(c.owned) != 0 {
		t.Fatalf("a still owns %v with its Lease marked", c.owned)
	}
	// The Lease went with that write: the next write creates one.
	fenced = nil
	for range 20 {
		step(ok("u2", false))
		now = now.Add(sh.RetryPeriod / 4)
	}
	for _, why := range fenced {
		t.Errorf("a fenced, holding nothing, after letting its own marked Lease go: %q", why)
	}
}
