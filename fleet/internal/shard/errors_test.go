package shard

import (
	"errors"
	"testing"
)

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
