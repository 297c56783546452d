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
