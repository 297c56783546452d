package flux_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/auth"
	"github.com/fluxcd/pkg/auth/generic"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// Flux's TestParseClusterAddress against the address our ConfigMap layer
// takes: each address in a generic ConfigMap of its own, watched by one
// fleet, which adds it (and logs in only once it is used: nothing here
// reaches these hosts) or refuses it.
func TestParseClusterAddressSideBySide(t *testing.T) {
	e := setup(t)
	const ns = "addresses"
	ctx := testwait.Context(t)
	if _, err := e.hubAdmin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		address string
		flux    string // Flux's canonical address; "" when it refuses
		ours    bool   // our ConfigMap layer takes it
	}{
		{"https://example.com:443", "https://example.com:443", true},
		// Ours on purpose, for the four below: the address is an https
		// URL as written, where the token goes and nothing made of it.
		{"example.com", "https://example.com:443", false},
		{"EXAMPLE.COM:8080", "https://example.com:8080", false},
		{"34.44.60.80", "https://34.44.60.80:443", false},
		{"https://flux:hunter2@example.com", "https://example.com:443", false},
		{"", "", false},
		{"------------\t", "", false},
		{"http://example.com:443", "", false},
	} {
		t.Run(strings.ReplaceAll(c.address, "/", ""), func(t *testing.T) {
			got, err := auth.ParseClusterAddress(c.address)
			if got != c.flux || (err == nil) != (c.flux != "") {
				t.Errorf("flux: got %q, %v; want %q", got, err, c.flux)
			}
			data := map[string]string{"provider": "generic", "serviceAccountName": deployer}
			if c.address != "" {
				data["address"] = c.address
			}
			cm := configMap{ns: ns, name: fmt.Sprintf("address-%02d", i), data: data}
			put(t, e, cm)
			refused, taken := watchOnce(t, e, cm)
			if taken != c.ours {
				t.Errorf("authvault: taken %v (refused: %q), want %v", taken, refused, c.ours)
			}
			if strings.Contains(refused, "hunter2") {
				t.Errorf("authvault: the refusal shows the address's password: %s", refused)
			}
		})
	}
}

// watchOnce runs a fleet's WatchFlux over cm until it takes or refuses
// it.
func watchOnce(t *testing.T, e *env, cm configMap) (refused string, taken bool) {
	t.Helper()
	var logs testlog.Buffer
	f := fleet.New(fleet.Options{Logger: logs.Logger(0)})
	defer f.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.WatchFlux(ctx, fleet.FluxOptions{Config: e.hub.Admin, Namespace: cm.ns, LabelSelector: caseLabel + "=" + cm.name, Operator: operatorNS + "/" + operatorSA})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	name := cm.ns + "/" + cm.name
	testwait.For(t, "the fleet to take or refuse "+name, func() bool {
		refused = refusal(logs.String(), name)
		taken = slices.Contains(f.Names(), name)
		return refused != "" || taken
	})
	return refused, taken
}

// generic NewControllerToken/no client: neither side goes anywhere
// without the hub.
func TestNoHubClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := generic.Provider{}.NewControllerToken(ctx)
	if err == nil || !strings.Contains(err.Error(), "client is required") {
		t.Errorf("flux: got %v, want an error saying a client is required", err)
	}
	f := fleet.New(fleet.Options{})
	defer f.Close()
	err = f.WatchFlux(ctx, fleet.FluxOptions{})
	if err == nil || !strings.Contains(err.Error(), "needs FluxOptions.Config") {
		t.Errorf("authvault: got %v, want an error saying it needs FluxOptions.Config", err)
	}
}

// generic GetIdentity: Flux's name for a ServiceAccount's identity is the
// user a member sees for our token of it, less the member's prefix.
func TestGenericIdentity(t *testing.T) {
	e := setup(t)
	cm := configMap{ns: tenantNS, name: "identity", data: map[string]string{"provider": "generic", "address": e.addr, "ca.crt": e.ca, "serviceAccountName": deployer}}
	put(t, e, cm)
	r := viaOurs(t, e, cm, &mints{}, fleet.FluxOptions{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	id, err := generic.Provider{}.GetIdentity(corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: deployer}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimPrefix(r.user, testcluster.MemberUserPrefix); got != id {
		t.Errorf("the member saw %q for our token; Flux's identity is %q", got, id)
	}
}
