package shard

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-logr/logr/funcr"
)

// A batch's log line names its clusters, the first ten in order, and counts
// the others: the line at the default level that says who owns a cluster.
func TestShardLogLinesNameTheClustersOfABatch(t *testing.T) {
	members := func(names ...string) []Moved {
		var ms []Moved
		for _, n := range names {
			ms = append(ms, Moved{Name: n})
		}
		return ms
	}
	if got := fmt.Sprint(namedIn(members("ns/b", "ns/a"))); got != "[names [ns/a ns/b]]" {
		t.Errorf("two clusters: %s", got)
	}
	many := seatNames(12)
	slices.Reverse(many)
	got := fmt.Sprint(namedIn(members(many...)))
	if want := fmt.Sprint([]any{"names", seatNames(10), "more", 2}); got != want {
		t.Errorf("twelve clusters: %s, want %s", got, want)
	}
}

func seatNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ns/c%02d", i)
	}
	return names
}

// fakeHost is a Host that holds what it is told, refuses the drops and
// takes named in refuse, and checks that its Locked methods are called
// with its lock held.
type fakeHost struct {
	t       *testing.T
	mu      sync.Mutex
	locked  bool
	locks   int
	members map[string]uint64 // cluster: gen
	refuse  map[string]bool
	causes  map[string]error
}

func (h *fakeHost) Lock()   { h.mu.Lock(); h.locked = true; h.locks++ }
func (h *fakeHost) Unlock() { h.locked = false; h.mu.Unlock() }

func (h *fakeHost) held(what string) {
	if !h.locked {
		h.t.Errorf("%s called without the host's lock", what)
	}
}

func (h *fakeHost) DropLocked(name string, gen uint64, cause error) (Moved, bool) {
	h.held("DropLocked")
	if h.refuse[name] || h.members[name] != gen {
		return Moved{}, false
	}
	delete(h.members, name)
	h.causes[name] = cause
	return Moved{Name: name, Gen: gen, Stop: func() {}, Hook: func() {}}, true
}

func (h *fakeHost) TakeLocked(name string, serial, gen uint64) (Moved, bool) {
	h.held("TakeLocked")
	if h.refuse[name] {
		return Moved{}, false
	}
	h.members[name] = gen
	return Moved{Name: name, Gen: gen, Hook: func() {}}, true
}

func (h *fakeHost) OwnedLocked() int { h.held("OwnedLocked"); return len(h.members) }

// A step's drops and takes go to the host under one lock; a take the host
// refuses is forgotten by the core (it would be taken again), a drop it
// refuses (the fleet retired the member itself) is neither returned nor
// counted, and each cluster given up ends with a cause that matches
// Config.NotOwned and names its new owner.
func TestDriverMovesMembersThroughTheHostUnderOneLock(t *testing.T) {
	var buf bytes.Buffer
	cfg := shortShards
	cfg.Identity, cfg.Group, cfg.Namespace = "a", "g", "ns"
	cfg.Log = funcr.New(func(prefix, args string) { buf.WriteString(args + "\n") }, funcr.Options{Verbosity: 1})
	cfg.NotOwned = errNotOwned
	host := &fakeHost{t: t, members: map[string]uint64{"ns/x": 1, "ns/y": 2}, refuse: map[string]bool{"ns/y": true, "ns/q": true}, causes: map[string]error{}}
	d := New(cfg, nil, host, clocktesting.NewFakeClock(modelEpoch))
	c := newCore(cfg)
	c.owned["ns/p"], c.owned["ns/q"] = 3, 4
	e := effects{
		drops: []giving{{name: "ns/x", gen: 1, to: "b", why: "moved"}, {name: "ns/y", gen: 2, to: "b", why: "moved"}},
		takes: []taking{{name: "ns/p", gen: 3, seat: 7}, {name: "ns/q", gen: 4, seat: 8}},
	}
	dropped, took := d.members(c, e)
	if host.locks != 1 {
		t.Errorf("the host was locked %d times for one step, want once", host.locks)
	}
	if len(dropped) != 1 || dropped[0].Name != "ns/x" || len(took) != 1 || took[0].Name != "ns/p" {
		t.Errorf("dropped %v, took %v: want ns/x and ns/p", dropped, took)
	}
	if _, ok := c.owned["ns/q"]; ok {
		t.Error("the core still holds ns/q, whose take the host refused")
	}
	if g, ok := c.owned["ns/p"]; !ok || g != 3 {
		t.Errorf("the core lost ns/p, taken: %v %v", g, ok)
	}
	cause := host.causes["ns/x"]
	if !errors.Is(cause, errNotOwned) || !strings.Contains(cause.Error(), `gave cluster "ns/x" up: moved`) {
		t.Errorf("ns/x given up with %v", cause)
	}
	log := buf.String()
	if !strings.Contains(log, `"cluster given up" "cluster"="ns/x"`) || strings.Contains(log, `"cluster"="ns/y"`) {
		t.Errorf("log of the step:\n%s", log)
	}
	if want := `"gave clusters up" "group"="g" "replica"="a" "clusters"=1`; !strings.Contains(log, want) {
		t.Errorf("no line %s in:\n%s", want, log)
	}
	d.metrics.unregister()
}
