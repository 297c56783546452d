package shard

import (
	"maps"
	"slices"
	"testing"
	"time"
)

// The schedules a second outside read found (F1, F3, F4; F2 is in
// shardclose_test.go), and the start: each on the model's hub with no
// fault but the one named, checked for two owners at every take.

// The shortest and longest durations a group may mix: four times apart.
var (
	quickShards = Config{LeaseDuration: 400 * time.Millisecond, RenewDeadline: 250 * time.Millisecond, RetryPeriod: 25 * time.Millisecond}
	slowShards  = Config{LeaseDuration: 1600 * time.Millisecond, RenewDeadline: 1000 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
)

// F1. A replica of the longer durations owns every cluster, is cut from
// the hub, and its Lease is deleted; one of the shorter durations starts
// and never reaches it. The deleted Lease stays, marked, so the new
// replica expires it on its holder's duration: it takes nothing before
// the hidden one has given its clusters up.
func TestShardScheduleHiddenReplicaOfLongerDuration(t *testing.T) {
	m := quietModel(20)
	a := m.start("a", slowShards)
	mustRun(t, m, 3*time.Second)
	ownedOnce(t, m, "before")
	start := m.now
	m.at(0, "a cut; its Lease deleted", func() { a.cut = true; m.deleteLease(LeaseName("g", "a")) })
	m.at(time.Millisecond, "", func() { m.start("c", quickShards) })
	mustRun(t, m, start+slowShards.LeaseDuration+time.Second)
	for name, by := range ownedOnce(t, m, "after") {
		if by != "c" {
			t.Errorf("%s owned by %s, want c", name, by)
		}
	}
	fenced := m.fencedAt["a"]
	if fenced == 0 {
		t.Fatal("a never gave its clusters up")
	}
	for _, tk := range m.takes {
		if tk.replica == "c" && tk.at < fenced {
			t.Errorf("c took %s at %v, before a gave it up at %v", tk.take.name, tk.at, fenced)
		}
	}
}

// F3. The survivor's lists fail for longer than a RetryPeriod and its
// timeout, and shorter than RenewDeadline, just as its peer goes: it takes
// the peer's share at its first list once the hub answers, not after its
// lists have run unbroken again for LeaseDuration.
func TestShardScheduleShortListOutageOfTheSurvivor(t *testing.T) {
	timeout := (shortShards.LeaseDuration - shortShards.RenewDeadline) / 4
	outage := shortShards.RetryPeriod + timeout + 100*time.Millisecond
	close := 50 * time.Millisecond // the test's slowest vault Close
	for _, how := range []string{"closes", "is killed"} {
		t.Run("a "+how, func(t *testing.T) {
			m := quietModel(20)
			a := m.start("a", shortShards)
			b := m.start("b", shortShards)
			mustRun(t, m, 3*time.Second)
			before := ownedOnce(t, m, "before")
			bound := outage + shortShards.RetryPeriod + 2*timeout + close
			if how == "is killed" {
				bound = shortShards.LeaseDuration + 2*shortShards.RetryPeriod + 2*timeout + close
			}
			m.at(0, "a "+how+"; b's lists fail", func() {
				if how == "closes" {
					m.closeReplica(a)
				} else {
					m.kill(a)
				}
				b.noList = true
			})
			m.at(outage, "b lists again", func() { b.noList = false })
			mustRun(t, m, m.now+4*time.Second)
			ownedOnce(t, m, "after")
			for name, was := range before {
				if was == "a" && m.longest[name] > bound {
					t.Errorf("%s had no owner for %v, past %v", name, m.longest[name], bound)
				}
			}
		})
	}
}

// F4. A peer's Lease expired (its replica cut from the hub), the replica
// reaches the hub and writes it again, and someone deletes it before the
// observer lists: the observer sees the new version, marked, and counts
// its claims, rather than forgetting the peer with the version it had
// expired. (The observer deletes an expired Lease itself: the replica
// writes a new one.)
func TestShardScheduleExpiredLeaseWrittenAgainThenDeleted(t *testing.T) {
	m := quietModel(20)
	a := m.start("a", shortShards)
	b := m.start("b", shortShards)
	mustRun(t, m, 3*time.Second)
	ownedOnce(t, m, "before")
	name := LeaseName("g", "a")
	uid := m.hub[name].uid
	m.at(0, "a is cut from the hub", func() { a.cut = true })
	mustRun(t, m, m.now+shortShards.LeaseDuration+500*time.Millisecond)
	if p := b.core.peers[name]; p != nil && !p.expired {
		t.Fatalf("b has not expired a's Lease: %+v", p)
	}
	m.at(0, "a reaches the hub again", func() { a.cut = false })
	var watch func()
	deleted, deletedLocal := time.Duration(0), time.Time{}
	watch = func() { // the delete lands right after a's next write
		if l := m.hub[name]; l != nil && l.uid != uid {
			m.deleteLease(name)
			m.say("hub: a's Lease, written again, deleted")
			m.list(b) // b lists at once
			deleted, deletedLocal = m.now, m.local(b)
			return
		}
		m.at(100*time.Microsecond, "", watch)
	}
	m.at(0, "", watch)
	for deleted == 0 && m.now < 10*time.Second {
		mustRun(t, m, m.now+100*time.Microsecond)
	}
	for b.core.listedAt.Before(deletedLocal) && m.now < deleted+time.Second { // until b's list answers
		mustRun(t, m, m.now+100*time.Microsecond)
	}
	if p := b.core.peers[name]; p == nil || p.expired || !p.marked {
		t.Errorf("after a wrote its Lease again and it was deleted, b's record of it: %+v; want it live and marked\n%s", p, m.tail())
	}
	mustRun(t, m, m.now+4*time.Second)
	ownedOnce(t, m, "after")
	if l := m.hub[name]; l == nil || l.marked || !l.finalizer {
		t.Errorf("a's Lease after it let the marked one go: %+v", l)
	}
}

// Replicas started within a RetryPeriod of each other (a Deployment's
// first rollout) agree on the view before any takes: each cluster is
// taken once, and all within the settle and a few requests of the last
// start.
func TestShardScheduleReplicasStartedTogetherMoveEachClusterOnce(t *testing.T) {
	rp := shortShards.RetryPeriod
	m := quietModel(60)
	for i, at := range []time.Duration{0, rp * 2 / 5, rp * 19 / 20} {
		id := string(rune('a' + i))
		m.at(at, "", func() { m.start(id, shortShards) })
	}
	last := rp * 19 / 20
	bound := last + rp + rp/4 + 4*(shortShards.LeaseDuration-shortShards.RenewDeadline)/4
	mustRun(t, m, bound)
	owner := ownedOnce(t, m, "at the bound")
	if n := len(slices.Compact(slices.Sorted(maps.Values(owner)))); n != 3 {
		t.Errorf("%d replicas own clusters, want 3", n)
	}
	mustRun(t, m, 3*time.Second)
	if len(m.takes) != len(m.seats) {
		var moves []string
		for _, tk := range m.takes {
			moves = append(moves, tk.replica+":"+tk.take.name)
		}
		t.Errorf("%d takes for %d clusters: %v", len(m.takes), len(m.seats), moves)
	}
}

// A replica that joins others has its share within 3×RetryPeriod plus
// its peers' hooks (1 ms here).
func TestShardScheduleJoiningReplicaGetsItsShareSoon(t *testing.T) {
	m := quietModel(60)
	m.hookTimes = func(*modelReplica, string) (time.Duration, time.Duration) { return time.Millisecond, time.Millisecond }
	m.start("a", shortShards)
	m.start("b", shortShards)
	mustRun(t, m, 3*time.Second)
	ownedOnce(t, m, "before")
	joined := m.now
	m.start("c", shortShards)
	bound := 3*shortShards.RetryPeriod + 2*time.Millisecond
	mustRun(t, m, joined+bound)
	owner := ownedOnce(t, m, "3×RetryPeriod after c joined")
	n := 0
	for _, by := range owner {
		if by == "c" {
			n++
		}
	}
	if n == 0 {
		t.Errorf("c owns nothing %v after it joined", bound)
	}
}

// Someone deletes a live replica's Lease: the replica gives its clusters
// up, lets the marked Lease go and writes a new one, and the clusters are
// owned again within the bound, never by two.
func TestShardScheduleLiveReplicasLeaseDeleted(t *testing.T) {
	m := quietModel(20)
	m.start("a", shortShards)
	m.start("b", shortShards)
	mustRun(t, m, 3*time.Second)
	ownedOnce(t, m, "before")
	name := LeaseName("g", "a")
	uid := m.hub[name].uid
	m.at(0, "a's Lease deleted", func() { m.deleteLease(name) })
	mustRun(t, m, m.now+3*time.Second)
	owner := ownedOnce(t, m, "after")
	if l := m.hub[name]; l == nil || l.uid == uid || l.marked || !l.finalizer {
		t.Errorf("a's Lease after the delete: %+v (uid before %d): want a new one, with the finalizer", l, uid)
	}
	if !slices.Contains(slices.Collect(maps.Values(owner)), "a") {
		t.Errorf("a owns nothing after writing its new Lease: %v", owner)
	}
}

// The doc's exception: a person takes the finalizer off a cut replica's
// marked Lease by hand. The Lease goes, its peers take its clusters at
// once, and two replicas own them until the cut one fences: at most
// RenewDeadline and its vaults' Close. The model shows it, and bounds it.
func TestShardScheduleFinalizerTakenOffByHand(t *testing.T) {
	m := quietModel(20)
	a := m.start("a", shortShards)
	m.start("b", shortShards)
	mustRun(t, m, 3*time.Second)
	ownedOnce(t, m, "before")
	name := LeaseName("g", "a")
	m.at(0, "a cut; its Lease deleted, its finalizer taken off by hand", func() {
		a.cut = true
		m.deleteLease(name)
		m.hub[name].finalizer = false
		delete(m.hub, name)
		m.handAt = m.now
	})
	for range 4000 {
		if err := m.runUntil(m.now + time.Millisecond); err != nil {
			t.Fatal(err)
		}
		m.twoOwners()
	}
	if m.overlap == 0 {
		t.Error("no two owners: the exception the doc names did not happen")
	}
	if bound := shortShards.RenewDeadline + 50*time.Millisecond; m.overlap > bound {
		t.Errorf("two owners for %v, past RenewDeadline and the Close (%v)", m.overlap, bound)
	}
	t.Logf("two owners for %v after the finalizer was taken off by hand", m.overlap)
}

// A replica closes cleanly: its Lease says released, then goes. A peer
// that lists in between (its watch wakes it on the release) and then
// finds the Lease gone takes its clusters at once: the release is this
// release's, not an older one's whose Lease a delete removes at once.
func TestShardScheduleCleanCloseHandsOverAtOnce(t *testing.T) {
	timeout := (shortShards.LeaseDuration - shortShards.RenewDeadline) / 4
	m := quietModel(20)
	a := m.start("a", shortShards)
	b := m.start("b", shortShards)
	mustRun(t, m, 3*time.Second)
	before := ownedOnce(t, m, "before")
	m.at(0, "a closes", func() { m.closeReplica(a) })
	name := LeaseName("g", "a")
	var watch func()
	watch = func() { // b's watch wakes it on the release: it lists at once
		if l := m.hub[name]; l != nil && l.content.free {
			m.list(b)
			return
		}
		m.at(100*time.Microsecond, "", watch)
	}
	m.at(0, "", watch)
	mustRun(t, m, m.now+2*time.Second)
	ownedOnce(t, m, "after")
	bound := 2*shortShards.RetryPeriod + 3*timeout
	for name, was := range before {
		if was == "a" && m.longest[name] > bound {
			t.Errorf("%s had no owner for %v after a closed, past %v", name, m.longest[name], bound)
		}
	}
}

// A list that began before this replica's Lease said its new view, and
// answered after, decides nothing: the next list goes out at once, not a
// RetryPeriod later (on a real API server, peers that saw a replica close
// took its clusters 0.5 s late, at their next periodic list).
func TestShardCoreListsAgainAtOnceAfterAListThatBeganBeforeTheWrite(t *testing.T) {
	sh := shortShards
	sh.Identity = "a"
	c := newCore(sh)
	c.seatAdded("ns/c00", 1)
	now := modelEpoch
	var e effects
	c.step(now, &e)
	if e.write == nil || !e.list {
		t.Fatalf("the first step writes and lists: %+v", e)
	}
	content := *e.write
	listStart := now
	now = now.Add(time.Millisecond)
	var e2 effects
	c.wrote(content, writeResult{start: listStart, end: now, ok: true, uid: "u1"}, &e2)
	now = now.Add(time.Millisecond)
	c.listed(listStart, now, nil, &e2) // began before the write ended
	var e3 effects
	c.step(now, &e3)
	if !e3.list {
		t.Errorf("after a list that began before the write, no list at once: the next is at %v", c.nextList.Sub(now))
	}
}
