package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// results are the bench's figures.
type results struct {
	flags                    benchFlags
	allOwned                 time.Duration
	fromStart                time.Duration // from the first replica process's start to the last take
	startTakes               int           // takes until every cluster was owned and nothing moved
	joinTime                 time.Duration // from the joiner's start to its last take
	writesLarge, writesSmall float64       // Lease writes per second
	replicas, single         map[string]event
	kill, join, cut          moves
	overlaps                 []string
}

// moves are the clusters that changed owner in one fault.
type moves struct {
	moved   int
	to      map[string]int
	strays  int             // moved though their owner was neither gone nor joined
	unowned []time.Duration // of the gone replica's clusters, sorted
}

// moves compares the owners before and after; gone is the replica that
// left (its clusters' unowned time runs from at, or from its OnRemove
// when it wrote one after at), "" for a join.
func (r *run) moves(before, after map[string]string, gone string, at time.Time) moves {
	m := moves{to: map[string]int{}}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, was := range before {
		is := after[name]
		if was == is {
			continue
		}
		m.moved++
		m.to[is]++
		if gone != "" && was != gone {
			m.strays++
		}
		if gone == "" {
			continue
		}
		from, took := at, time.Time{}
		for _, e := range r.events {
			t := time.Unix(0, e.T)
			if t.Before(at) || e.Cluster != name {
				continue
			}
			if e.replica == gone && e.Ev == "remove" {
				from = t
			}
			if e.replica == is && e.Ev == "add" && took.IsZero() {
				took = t
			}
		}
		m.unowned = append(m.unowned, took.Sub(from))
	}
	slices.Sort(m.unowned)
	return m
}

// overlaps lists each cluster that two replicas owned at once, from the
// events: a span runs from a replica's add to its remove, to its kill, or
// to now.
func (r *run) overlaps(killed map[string]time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type span struct {
		replica  string
		from, to time.Time
	}
	spans := map[string][]*span{}
	open := map[[2]string]*span{}
	for _, e := range r.events {
		t := time.Unix(0, e.T)
		key := [2]string{e.replica, e.Cluster}
		switch e.Ev {
		case "add":
			s := &span{replica: e.replica, from: t, to: time.Now().Add(time.Hour)}
			if k, ok := killed[e.replica]; ok {
				s.to = k
			}
			spans[e.Cluster] = append(spans[e.Cluster], s)
			open[key] = s
		case "remove":
			if s := open[key]; s != nil {
				s.to = t
				delete(open, key)
			}
		}
	}
	var out []string
	for name, ss := range spans {
		for i, a := range ss {
			for _, b := range ss[i+1:] {
				if a.replica != b.replica && a.from.Before(b.to) && b.from.Before(a.to) {
					out = append(out, fmt.Sprintf("%s: %s and %s", name, a.replica, b.replica))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func (m moves) longest() time.Duration {
	if len(m.unowned) == 0 {
		return 0
	}
	return m.unowned[len(m.unowned)-1]
}

func (m moves) median() time.Duration {
	if len(m.unowned) == 0 {
		return 0
	}
	return m.unowned[len(m.unowned)/2]
}

// limit is the longest a cluster may go unowned: LeaseDuration +
// 2×RetryPeriod.
func (res *results) limit() time.Duration {
	return res.flags.shards.leaseDuration + 2*res.flags.shards.retryPeriod
}

func (res *results) print(w io.Writer) {
	sh := res.flags.shards
	fmt.Fprintf(w, "shardbench: %d clusters, 3 replica processes, LeaseDuration %v, RenewDeadline %v, RetryPeriod %v\n\n", res.flags.clusters, sh.leaseDuration, sh.renewDeadline, sh.retryPeriod)
	fmt.Fprintf(w, "| measure | figure | goal |\n| --- | ---: | --- |\n")
	fmt.Fprintf(w, "| every cluster owned, from the first replica process's start | %v | ≤ 3s |\n", res.fromStart.Round(time.Millisecond))
	fmt.Fprintf(w, "| takes at the start, per cluster (replicas started together) | %.2f | 1 |\n", float64(res.startTakes)/float64(res.flags.clusters))
	fmt.Fprintf(w, "| a 4th replica joins: its share taken, from its process's start | %v | ≤ %v and the hooks (1 s) |\n", res.joinTime.Round(time.Millisecond), 3*sh.retryPeriod)
	fmt.Fprintf(w, "| kill -9: clusters moved (the dead replica's / others) | %d / %d | others 0 |\n", res.kill.moved-res.kill.strays, res.kill.strays)
	fmt.Fprintf(w, "| kill -9: unowned, median / longest | %v / %v | ≤ %v |\n", res.kill.median().Round(time.Millisecond), res.kill.longest().Round(time.Millisecond), res.limit())
	fmt.Fprintf(w, "| a 4th replica joins: clusters moved (to it / elsewhere) | %d / %d | ≤ %d (1.5 × 1/4), elsewhere 0 |\n", res.join.to["r3"], res.join.moved-res.join.to["r3"], res.flags.clusters*3/2/4)
	fmt.Fprintf(w, "| cut from the hub: clusters moved (its own / others) | %d / %d | others 0 |\n", res.cut.moved-res.cut.strays, res.cut.strays)
	fmt.Fprintf(w, "| cut from the hub: unowned (its OnRemove to the new OnAdd), median / longest | %v / %v | ≤ %v |\n", res.cut.median().Round(time.Millisecond), res.cut.longest().Round(time.Millisecond), res.limit())
	fmt.Fprintf(w, "| overlaps (two owners at once) | %d | 0 |\n", len(res.overlaps))
	fmt.Fprintf(w, "| Lease writes per second, %d clusters | %.2f | ≤ %.2f |\n", res.flags.clusters, res.writesLarge, 3/sh.retryPeriod.Seconds())
	fmt.Fprintf(w, "| Lease writes per second, %d clusters | %.2f | the same |\n", res.flags.small, res.writesSmall)
	fmt.Fprintf(w, "\nOnce every cluster was owned, before the faults:\n\n| process | clusters owned | logins | heap (MiB) | sockets |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, id := range []string{"r0", "r1", "r2"} {
		s := res.replicas[id]
		fmt.Fprintf(w, "| replica %s | %d | %d | %.1f | %d |\n", id, s.Owned, s.Logins, float64(s.Heap)/(1<<20), s.Sockets)
	}
	s := res.single["single"]
	fmt.Fprintf(w, "| one unsharded process | %d | %d | %.1f | %d |\n", s.Owned, s.Logins, float64(s.Heap)/(1<<20), s.Sockets)
	for _, o := range res.overlaps {
		fmt.Fprintln(w, "overlap:", o)
	}
}

// missed says which goals the figures miss.
func (res *results) missed() error {
	var errs []error
	if res.fromStart > 3*time.Second && res.flags.shards.retryPeriod >= 2*time.Second {
		errs = append(errs, fmt.Errorf("every cluster was owned %v after the first replica started, past 3 s", res.fromStart))
	}
	if limit := 3*res.flags.shards.retryPeriod + time.Second; res.joinTime > limit {
		errs = append(errs, fmt.Errorf("the joiner had its share %v after it started, past 3×RetryPeriod and a second for the hooks (%v)", res.joinTime, limit))
	}
	if res.startTakes != res.flags.clusters {
		errs = append(errs, fmt.Errorf("%d takes at the start for %d clusters: replicas started together moved some", res.startTakes, res.flags.clusters))
	}
	if len(res.overlaps) > 0 {
		errs = append(errs, fmt.Errorf("%d clusters had two owners at once", len(res.overlaps)))
	}
	for what, m := range map[string]moves{"the kill": res.kill, "the cut": res.cut} {
		if m.strays > 0 {
			errs = append(errs, fmt.Errorf("%s moved %d clusters of replicas that stayed", what, m.strays))
		}
		if m.longest() > res.limit() {
			errs = append(errs, fmt.Errorf("after %s a cluster went unowned %v, past %v", what, m.longest(), res.limit()))
		}
	}
	if n, limit := res.join.to["r3"], res.flags.clusters*3/2/4; n > limit || n != res.join.moved {
		errs = append(errs, fmt.Errorf("the join moved %d clusters, %d to the joiner (at most %d, all to it)", res.join.moved, n, limit))
	}
	if most := 3 / res.flags.shards.retryPeriod.Seconds(); res.writesLarge > most*1.1 || res.writesSmall > most*1.1 {
		errs = append(errs, fmt.Errorf("the Lease writes per second, %.2f and %.2f, are past replicas / RetryPeriod (%.2f)", res.writesLarge, res.writesSmall, most))
	}
	for id, st := range res.replicas {
		if st.Logins > st.Owned {
			errs = append(errs, fmt.Errorf("replica %s logged in %d times, owning %d clusters", id, st.Logins, st.Owned))
		}
	}
	return errors.Join(errs...)
}
