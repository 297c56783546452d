package eks_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/testkit/testwait"
)

// The fleet reads a profile's arguments as the real aws-iam-authenticator
// does. A profile whose arguments it refuses would have the plugin, given
// the same command line, assume the profile's role (or fail); one it takes
// has the plugin, run for the profile's cluster, assume the provider's.
// No native login is in use here: the binary runs.
func TestAWSIAMAuthenticatorReadsProfileArgsAsTheFleetDoes(t *testing.T) {
	s := newSTSStub(t)
	routeDefaultTransportTo(t, s)
	exec := pluginExec(t, testCluster)
	exec.Env = append(exec.Env, stsProxy(t, s)...)
	own := []string{"token", "-r", testRoleARN, "--region", testRegion}
	exec.Args = own
	pf := watchProfiles(t, s.caPEM(), fleet.ProfilesOptions{
		// The plugin's environment points it at the stand-in (a proxy, a
		// CA bundle), which only AllowAll lets a plugin's environment do.
		PluginPolicy: handlers.AllowAll,
		Providers:    []fleet.AccessProvider{{Name: "iam", ProfileSourcedCLIArgsPolicy: fleet.ArgsAppend, ExecConfig: &exec.ExecConfig}},
	})

	cases := slices.Concat(roleAttempts["iam"], [][]string{
		{"--role-arn", otherRole},                         // not its flag: it fails
		{"-s-r", "--session-name", "-r"},                  // each -r a session's name
		{"--external-id", "ext-1", "--", "-r", otherRole}, // words after "--"
		{"--forward-session-name"},
	})
	for i, extra := range cases {
		pf.put(t, fmt.Sprint("p", i), "iam", testEndpoint, slices.Concat([]string{"-i", testCluster}, extra)...)
	}
	pf.put(t, "last", "iam", testEndpoint, "-i", testCluster)
	pf.added(t, "last") // after the others: the watch has seen them

	var taken int
	for i, extra := range cases {
		// Each run of the plugin has its own bound on a hang: one 60-s
		// deadline over all eleven runs (a process start, TLS through the
		// proxy and AssumeRole each) was a budget for the machine's speed,
		// and the cases it would fail first are the last, those the fleet
		// takes.
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
		defer cancel()
		before := len(s.roles())
		if pf.fleet.Vault(fmt.Sprint("inventory/p", i)) != nil {
			taken++
			if _, err := pf.fleet.RESTConfig(ctx, fmt.Sprint("inventory/p", i)); err != nil {
				t.Errorf("%q, taken by the fleet: the plugin fails: %v", extra, err)
			}
			if got := s.roles()[before:]; !slices.Equal(got, []string{testRoleARN}) {
				t.Errorf("%q, taken by the fleet: the plugin asked STS for %q, want the provider's role", extra, got)
			}
			continue
		}
		bare := exec
		bare.Args = slices.Concat(own, []string{"-i", testCluster}, extra)
		_, err := handlers.Exec(bare)(ctx)
		got := s.roles()[before:]
		if err == nil && slices.Equal(got, []string{testRoleARN}) {
			t.Errorf("%q, refused by the fleet: the plugin given it assumes the provider's role all the same", extra)
		}
		t.Logf("%q, refused by the fleet: the plugin given it asks STS for %q (error: %v)", extra, got, err != nil)
	}
	if taken != 3 {
		t.Errorf("the fleet took %d of the profiles, want the last 3", taken)
	}
}
