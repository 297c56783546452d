package eks_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/fakewatch"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// otherRole is a role a ClusterProfile tries to have this process assume in
// place of the provider's.
const otherRole = "arn:aws:iam::111122223333:role/chosen-by-the-profile"

// profileFleet is a fleet that watches the ClusterProfiles of a fake hub.
type profileFleet struct {
	fleet  *fleet.Fleet
	client *dynamicfake.FakeDynamicClient
	logs   *testlog.Buffer
	ca     []byte // of every profile's cluster
}

var profilesGVR = schema.GroupVersionResource{Group: fleet.ProfileGroup, Version: "v1alpha1", Resource: "clusterprofiles"}

// watchProfiles starts a fleet that watches the fake hub's profiles with
// opts, until the test ends; their clusters' CA is ca.
func watchProfiles(t *testing.T, ca []byte, opts fleet.ProfilesOptions) *profileFleet {
	t.Helper()
	p := &profileFleet{logs: &testlog.Buffer{}, ca: ca}
	p.client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{profilesGVR: "ClusterProfileList"})
	p.fleet = fleet.New(fleet.Options{Logger: p.logs.Logger(0)})
	opts.Client = p.client
	begun := fakewatch.Begun(&p.client.Fake, p.client.Tracker())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.fleet.WatchClusterProfiles(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		<-done
		p.fleet.Close()
	})
	if err := begun(); err != nil {
		t.Fatal(err)
	}
	return p
}

// put writes the profile name, which offers the access provider provider
// for server, with args for its plugin.
func (p *profileFleet) put(t *testing.T, name, provider, server string, args ...string) {
	t.Helper()
	list := make([]any, len(args))
	for i, a := range args {
		list[i] = a
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.ProfileGroup + "/v1alpha1",
		"kind":       "ClusterProfile",
		"metadata":   map[string]any{"namespace": "inventory", "name": name},
		"spec":       map[string]any{"clusterManager": map[string]any{"name": "test"}},
		"status": map[string]any{"accessProviders": []any{map[string]any{"name": provider, "cluster": map[string]any{
			"server":                     server,
			"certificate-authority-data": base64.StdEncoding.EncodeToString(p.ca),
			"extensions":                 []any{map[string]any{"name": fleet.ExtraArgsExtension, "extension": list}},
		}}}},
	}}
	if _, err := p.client.Resource(profilesGVR).Namespace("inventory").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// added waits until the cluster of profile name is in the fleet.
func (p *profileFleet) added(t *testing.T, name string) {
	t.Helper()
	// Bounded by testwait.Hang: what the informer takes to add twelve
	// profiles is the machine's pace, and 20 s was a budget for it.
	for deadline := time.Now().Add(testwait.Hang); p.fleet.Vault("inventory/"+name) == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("profile %s: its cluster was not added within %v; logs:\n%s", name, testwait.Hang, p.logs)
		}
	}
}

// roleProviders are EKS access providers that fix the role, and a
// profile's arguments that name its cluster; each profile that
// roleAttempts lists sets the role again.
var roleProviders = []struct {
	name, command string
	args          []string
	cluster       []string
}{
	{"iam", "aws-iam-authenticator", []string{"token", "-r", testRoleARN, "--region", testRegion}, []string{"-i", testCluster}},
	{"aws", "aws", []string{"--region", testRegion, "eks", "get-token", "--role-arn", testRoleARN}, []string{"--cluster-name", testCluster}},
}

// roleAttempts are a profile's arguments that set the role again, for
// each provider of roleProviders: every name and spelling of the flag
// that its plugin reads.
var roleAttempts = map[string][][]string{
	"iam": {{"-r", otherRole}, {"-r" + otherRole}, {"-r=" + otherRole}, {"--role", otherRole}, {"--role=" + otherRole},
		{"-hr", otherRole}, {"--session-name", "ops", "-r", otherRole}},
	"aws": {{"--role-arn", otherRole}, {"--role-arn=" + otherRole}, {"--role", otherRole}, {"--role-a=" + otherRole},
		{"--ro", otherRole}, {"--", "--role-arn", otherRole}},
}

// Through a fleet's ClusterProfiles, the native EKS login, asked for the
// profile's cluster with the arguments the profile appends, assumes the
// role the provider file fixed: a profile that sets the role again, under
// any name the plugin has for it, in any spelling, is refused, and nothing
// is asked of AWS for it. (Before, "--role" beside the provider's "-r",
// or an abbreviation of the aws CLI's --role-arn, had the native login ask
// STS for the profile's role, and the profile was served.)
func TestProfileCannotChooseTheNativeLoginsRole(t *testing.T) {
	s := newSTSStub(t)
	s.staticEnv(t)
	useNative(t)
	var providers []fleet.AccessProvider
	for _, p := range roleProviders {
		providers = append(providers, fleet.AccessProvider{Name: p.name, ProfileSourcedCLIArgsPolicy: fleet.ArgsAppend,
			ExecConfig: &clientcmdapi.ExecConfig{Command: p.command, Args: p.args, APIVersion: "client.authentication.k8s.io/v1beta1"}})
	}
	pf := watchProfiles(t, s.caPEM(), fleet.ProfilesOptions{Providers: providers})
	var refused []string
	for _, p := range roleProviders {
		for i, attempt := range roleAttempts[p.name] {
			name := fmt.Sprintf("%s-%d", p.name, i)
			refused = append(refused, name)
			pf.put(t, name, p.name, testEndpoint, slices.Concat(p.cluster, attempt)...)
		}
	}
	for _, p := range roleProviders {
		pf.put(t, p.name, p.name, testEndpoint, p.cluster...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range roleProviders {
		pf.added(t, p.name) // after the others: the watch has seen them
		if _, err := pf.fleet.RESTConfig(ctx, "inventory/"+p.name); err != nil {
			t.Fatalf("profile %s: %v", p.name, err)
		}
	}
	for _, name := range refused {
		if pf.fleet.Vault("inventory/"+name) != nil {
			t.Errorf("profile %s, which sets the role again, was added", name)
			_, _ = pf.fleet.RESTConfig(ctx, "inventory/"+name) // its login: which role does it assume?
		}
		if logs := pf.logs.String(); !strings.Contains(logs, "inventory/"+name) {
			t.Errorf("profile %s: its refusal is not logged", name)
		}
	}
	if got := s.roles(); len(got) != len(roleProviders) || slices.ContainsFunc(got, func(r string) bool { return r != testRoleARN }) {
		t.Errorf("AssumeRole was asked for %q; want the provider's role, once per provider", got)
	}
	if logs := pf.logs.String(); strings.Contains(logs, otherRole) {
		t.Errorf("the logs quote the role the profiles chose:\n%s", logs)
	}
}
