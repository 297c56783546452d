package shard

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func coreOf(id string) *core {
	cfg := Config{Identity: id, LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
	return newCore(cfg)
}

// A write that fails at once (hub refuses: RBAC, webhook, a duplicate
// identity's Lease found by the Get) must be retried after RetryPeriod,
// not at once: the log line says "retrying every RetryPeriod".
func TestShardCoreRetriesAFailedWriteAfterRetryPeriod(t *testing.T) {
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
func TestShardCoreBoundsAPeersDuration(t *testing.T) {
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

// record never panics on a peer's garbage, and reads it as unreadable.
func TestShardsRecordOfGarbageNeverPanics(t *testing.T) {
	s := &Driver{lease: LeaseName("g", "self"), cfg: Config{Group: "g"}}
	for _, tc := range []struct {
		ann      map[string]string
		readable bool
	}{
		{map[string]string{viewAnnotation: "{"}, false},
		{map[string]string{viewAnnotation: `{"a":1}`}, false},
		{map[string]string{viewAnnotation: `[1,2]`}, false},
		{map[string]string{viewAnnotation: `null`}, true},
		{map[string]string{viewAnnotation: `[]`, rulesAnnotation: "x"}, false},
		{map[string]string{viewAnnotation: `[]`, rulesAnnotation: "-3"}, false},
		{map[string]string{viewAnnotation: `[]`, durationAnnotation: "-5s"}, true},
		{map[string]string{viewAnnotation: `[]`, durationAnnotation: "99999999999h"}, true},
		{map[string]string{viewAnnotation: "\xff\xfe"}, false},
		{map[string]string{incarnationAnnotation: "x"}, false}, // its view taken off by hand: it may claim anything
	} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("g", "x"), Annotations: tc.ann}}
		r, ok := s.record(l)
		if !ok || r.readable != tc.readable || r.duration < 0 {
			t.Errorf("%q: ok %v readable %v (want %v) duration %v", tc.ann, ok, r.readable, tc.readable, r.duration)
		}
	}
	for _, name := range []string{LeaseName("g", "self"), "g-x", LeaseName("g-old", "x"), "g-0123456789ABCDEF", "other-0123456789abcdef"} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{viewAnnotation: "[]"}}}
		if _, ok := s.record(l); ok {
			t.Errorf("the Lease %s is read as a peer's of group g", name)
		}
	}
}

// R58-4. The write that takes the finalizer off a marked Lease lands but
// its answer is lost (a timeout). The next write finds no Lease, creates
// one, and the core, seeing a new UID, "fences": it logs at INFO that its
// Lease "was replaced under it: its peers may take its clusters", though
// it had let that Lease go itself and held nothing.
func TestShardCoreReview58LostAnswerToTheFreeWriteIsNoFence(t *testing.T) {
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
