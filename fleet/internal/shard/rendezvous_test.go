package shard

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A replica that joins N takes about 1/(N+1) of the clusters, each from
// the one that had it and none between the others; one that leaves moves
// only its own. The goal of the issue that asked for shards: at most 1.5
// times the fair share on a join.
func TestRendezvousMovesTheFewestClusters(t *testing.T) {
	const clusters = 1000
	names := make([]string, clusters)
	for i := range names {
		names[i] = fmt.Sprintf("ns/cluster-%04d", i)
	}
	for n := 1; n <= 8; n++ {
		before := make([]string, n)
		for i := range before {
			before[i] = fmt.Sprintf("replica-%d", i)
		}
		after := append(append([]string(nil), before...), "joiner")
		moved := 0
		for _, name := range names {
			was, is := OwnerOf(before, name), OwnerOf(after, name)
			if was != is {
				if is != "joiner" {
					t.Fatalf("%d → %d replicas: %s moved from %s to %s, not to the joiner", n, n+1, name, was, is)
				}
				moved++
			}
		}
		if limit := clusters * 3 / 2 / (n + 1); moved > limit {
			t.Errorf("%d → %d replicas: %d of %d clusters moved, more than 1.5 × 1/%d (%d)", n, n+1, moved, clusters, n+1, limit)
		}
		if moved == 0 {
			t.Errorf("%d → %d replicas: the joiner took nothing", n, n+1)
		}
		// And back: the joiner leaves, and only its clusters move.
		for _, name := range names {
			if was, is := OwnerOf(after, name), OwnerOf(before, name); was != is && was != "joiner" {
				t.Fatalf("%d → %d replicas: %s moved from %s, which stayed", n+1, n, name, was)
			}
		}
	}
	if got := OwnerOf(nil, "any"); got != "" {
		t.Errorf("no replica: owner %q, want none", got)
	}
}

var errNotOwned = errors.New("not owned")

func TestNotOwnedSaysWhoOwnsTheCluster(t *testing.T) {
	for _, tc := range []struct {
		err  *notOwnedError
		want string
	}{
		{&notOwnedError{name: "c", self: "a", owner: "b", is: errNotOwned}, `fleet: cluster "c" is owned by replica "b", not this one ("a")`},
		{&notOwnedError{name: "c", self: "a", is: errNotOwned}, `fleet: cluster "c" is owned by no replica yet (this is "a")`},
		{&notOwnedError{name: "c", self: "a", owner: "a", is: errNotOwned}, `fleet: cluster "c" is this replica's ("a") once its previous owner has let it go`},
		{&notOwnedError{name: "c", self: "a", owner: "b", why: "moved", is: errNotOwned}, `fleet: replica "a" gave cluster "c" up: moved`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if !errors.Is(tc.err, errNotOwned) {
			t.Errorf("%q does not match Config.NotOwned", tc.err)
		}
	}
}

// A Lease's name holds no character of the identity, which may be any
// string, and stays the same across the replica's restarts.
func TestLeaseNamesAreValidWhateverTheIdentity(t *testing.T) {
	a, b := LeaseName("g", "pod-0"), LeaseName("g", "Pod 0/with:odd chars")
	if a == b || a != LeaseName("g", "pod-0") || !strings.HasPrefix(a, "g-") || len(a) != len("g-")+16 {
		t.Errorf("lease names %q and %q", a, b)
	}
	if strings.ContainsAny(b, " /:P") {
		t.Errorf("lease name %q holds the identity's characters", b)
	}
	for _, name := range []string{a, b, "g-0123456789abcdef"} {
		if !inGroup("g", name) {
			t.Errorf("%q is not found as a Lease of group g", name)
		}
	}
	for _, name := range []string{"g-0123456789ABCDEF", "g-0123456789abcde", "gg-0123456789abcdef", LeaseName("g-x", "a")} {
		if inGroup("g", name) {
			t.Errorf("%q is found as a Lease of group g", name)
		}
	}
}
