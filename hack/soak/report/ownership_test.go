package report

import (
	"slices"
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// sharedOwners is a run of two replicas sampled every second for a
// minute, sharing clusters a and b: owns(role, second) says what role owns
// then; nil means it sent no sample.
func sharedOwners(owns func(role string, second int) []string) *Run {
	r := &Run{Start: t0, Settled: t0, End: t0.Add(time.Minute), Clusters: 2, Sides: map[string]*Side{},
		Shared: []string{wire.RoleAuthvault, wire.RoleShardPeer}}
	for _, role := range r.Shared {
		side := &Side{Role: role}
		for i := range 60 {
			if owned := owns(role, i); owned != nil {
				side.Samples = append(side.Samples, wire.Sample{At: t0.Add(time.Duration(i) * time.Second), Owned: owned})
			}
		}
		r.Sides[role] = side
	}
	return r
}

func kinds(fs []wire.Failure) map[string]int {
	n := map[string]int{}
	for _, f := range fs {
		n[f.Kind]++
	}
	return n
}

func TestOwnership(t *testing.T) {
	split := func(role string, _ int) []string {
		if role == wire.RoleAuthvault {
			return []string{"a"}
		}
		return []string{"b"}
	}
	if got := ownershipFailures(sharedOwners(split)); len(got) != 0 {
		t.Errorf("a split fleet: %v", got)
	}

	// The peer killed at 20 s, back at 40 s: its cluster b goes unowned
	// until the authvault side takes it at 30 s, and returns to it then.
	killed := func(role string, i int) []string {
		switch {
		case role == wire.RoleShardPeer && i >= 20 && i < 40:
			return nil
		case role == wire.RoleAuthvault && i >= 30 && i < 40:
			return []string{"a", "b"}
		}
		return split(role, i)
	}
	got := ownershipFailures(sharedOwners(killed))
	// The peer's last sample (19 s) counts for three gaps: b is unowned
	// from 23 s to 29 s.
	if n := kinds(got[wire.RoleAuthvault]); n["unowned"] != 7 || len(n) != 1 || len(got[wire.RoleShardPeer]) != 0 {
		t.Errorf("a replica killed: %v", got)
	}
	restart := Fault{Kind: "replica-restart", Start: t0.Add(20 * time.Second), End: t0.Add(40 * time.Second), Scope: "fleet"}
	for _, f := range got[wire.RoleAuthvault] {
		if !restart.explains(f) {
			t.Errorf("the replica's kill does not explain %+v", f)
		}
	}

	// Both own b from 10 s to 20 s: each one's samples inside the other's.
	both := func(role string, i int) []string {
		if role == wire.RoleAuthvault && i >= 10 && i < 20 {
			return []string{"a", "b"}
		}
		return split(role, i)
	}
	got = ownershipFailures(sharedOwners(both))
	if n := kinds(got[wire.RoleAuthvault]); n["two-owners"] == 0 {
		t.Errorf("two owners: %v", got)
	}
	for _, f := range slices.Concat(got[wire.RoleAuthvault], got[wire.RoleShardPeer]) {
		if (Fault{Kind: "apiserver-restart", Start: t0, End: t0.Add(time.Minute), Scope: "all"}).explains(f) {
			t.Errorf("a fault explains %+v", f)
		}
	}

	// A handover between two samples is no overlap.
	handover := func(role string, i int) []string {
		if i >= 30 {
			if role == wire.RoleAuthvault {
				return []string{"a", "b"}
			}
			return []string{}
		}
		return split(role, i)
	}
	if got := ownershipFailures(sharedOwners(handover)); len(got) != 0 {
		t.Errorf("a handover: %v", got)
	}
}
