package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
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
			was, is := ownerOf(before, name), ownerOf(after, name)
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
			if was, is := ownerOf(after, name), ownerOf(before, name); was != is && was != "joiner" {
				t.Fatalf("%d → %d replicas: %s moved from %s, which stayed", n+1, n, name, was)
			}
		}
	}
	if got := ownerOf(nil, "any"); got != "" {
		t.Errorf("no replica: owner %q, want none", got)
	}
}

func TestShardsRequireTheirFieldsAndOrderTheirDurations(t *testing.T) {
	cfg := &rest.Config{Host: "https://hub.invalid"}
	for _, tc := range []struct {
		sh   Shards
		want string
	}{
		{Shards{Namespace: "ns", Group: "g"}, "Shards.Config is required"},
		{Shards{Config: cfg, Group: "g"}, "Shards.Namespace is required"},
		{Shards{Config: cfg, Namespace: "ns"}, "Shards.Group is required"},
		{Shards{Config: cfg, Namespace: "ns", Group: "Not_A_Label"}, "must be a DNS label"},
		{Shards{Config: cfg, Namespace: "ns", Group: strings.Repeat("g", groupMax+1)}, "must be a DNS label"},
		{Shards{Config: cfg, Namespace: "ns", Group: "g", RenewDeadline: 20 * time.Second}, "RenewDeadline (20s) < LeaseDuration (15s)"},
		{Shards{Config: cfg, Namespace: "ns", Group: "g", RetryPeriod: -time.Second}, "10ms ≤ RetryPeriod"},
	} {
		_, err := tc.sh.withDefaults()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one that says %q", tc.sh, err, tc.want)
		}
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Errorf("New with %+v: panic %v, want one that says %q", tc.sh, r, tc.want)
				}
			}()
			sh := tc.sh
			New(Options{Shards: &sh}).Close()
		}()
	}
	got, err := Shards{Config: cfg, Namespace: "ns", Group: "g"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.Identity == "" || got.LeaseDuration != 15*time.Second || got.RenewDeadline != 10*time.Second || got.RetryPeriod != 2*time.Second {
		t.Errorf("defaults: %+v, want the host name and leader election's 15 s, 10 s, 2 s", got)
	}
}

func TestNotOwnedSaysWhoOwnsTheCluster(t *testing.T) {
	for _, tc := range []struct {
		err  *notOwnedError
		want string
	}{
		{&notOwnedError{name: "c", self: "a", owner: "b"}, `fleet: cluster "c" is owned by replica "b", not this one ("a")`},
		{&notOwnedError{name: "c", self: "a"}, `fleet: cluster "c" is owned by no replica yet (this is "a")`},
		{&notOwnedError{name: "c", self: "a", owner: "a"}, `fleet: cluster "c" is this replica's ("a") once its previous owner has let it go`},
		{&notOwnedError{name: "c", self: "a", owner: "b", why: "moved"}, `fleet: replica "a" gave cluster "c" up: moved`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if !errors.Is(tc.err, ErrNotOwned) {
			t.Errorf("%q does not match ErrNotOwned", tc.err)
		}
	}
}

// A Lease's name holds no character of the identity, which may be any
// string, and stays the same across the replica's restarts.
func TestLeaseNamesAreValidWhateverTheIdentity(t *testing.T) {
	a, b := leaseName("g", "pod-0"), leaseName("g", "Pod 0/with:odd chars")
	if a == b || a != leaseName("g", "pod-0") || !strings.HasPrefix(a, "g-") || len(a) != len("g-")+16 {
		t.Errorf("lease names %q and %q", a, b)
	}
	if strings.ContainsAny(b, " /:P") {
		t.Errorf("lease name %q holds the identity's characters", b)
	}
}

// A sharded fleet's watches run on every replica: each sees every cluster
// and starts only those it owns.
func TestShardedWatchersRunOnEveryReplica(t *testing.T) {
	f := New(Options{Shards: &Shards{Config: &rest.Config{Host: "https://127.0.0.1:1"}, Namespace: "ns", Group: "g", Identity: "a"}})
	defer f.Close()
	if f.SecretsWatcher(SecretsOptions{}).NeedLeaderElection() || f.ProfilesWatcher(ProfilesOptions{}).NeedLeaderElection() {
		t.Error("a sharded fleet's watcher asks for the leader only")
	}
	if err := f.Add("c", func(context.Context) (*login.ConnectionInfo, error) { return nil, errors.New("never called") }); err != nil {
		t.Fatal(err)
	}
	_, err := f.RESTConfig(ctxFor(t), "c")
	if !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), "no replica yet") {
		t.Errorf("RESTConfig of a cluster no replica owns yet (the hub cannot be reached): %v, want ErrNotOwned", err)
	}
	if f.Vault("c") != nil {
		t.Error("a cluster no replica owns has a vault")
	}
}

// The hub's errors a sharded fleet logs (a list, a renewal, the release at
// Close, all failing here: nothing listens) never carry the user info of
// the hub's URL, nor its token.
func TestShardsLogNoSecretOfTheHub(t *testing.T) {
	var logs testlog.Buffer
	f := New(Options{Logger: logs.Logger(1), Shards: &Shards{
		Config:    &rest.Config{Host: "https://hub-user:url-s3cr3t@127.0.0.1:1", BearerToken: "token-s3cr3t"},
		Namespace: "ns", Group: "g", Identity: "a",
		RetryPeriod: 20 * time.Millisecond, RenewDeadline: 100 * time.Millisecond, LeaseDuration: 200 * time.Millisecond,
	}})
	testwait.For(t, "the failures to be logged", func() bool {
		out := logs.String()
		return strings.Contains(out, "cannot renew this replica's Lease") && strings.Contains(out, "cannot list the group's Leases")
	})
	f.Close()
	out := logs.String()
	if !strings.Contains(out, "cannot mark this replica's Lease released") {
		t.Errorf("Close logged no failed release:\n%s", out)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("a log line carries the hub's password or token:\n%s", out)
	}
}
