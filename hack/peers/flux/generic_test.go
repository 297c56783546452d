package flux_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/testwait"
)

// want is a side's outcome for a ConfigMap.
type want struct {
	user   string // the user the member authenticated; "": none
	err    string // what the first failure says; "": none, and the side listed the member's namespaces
	minted string // the TokenRequests made on the hub (mints.distinct); "": none
}

func (w want) check(t *testing.T, side string, got reading) {
	t.Helper()
	t.Logf("%s: user %q, listed %d namespaces, minted %q, error: %v", side, got.user, got.listed, got.minted, got.err)
	switch {
	case w.err == "" && got.err != nil:
		t.Errorf("%s: got %v, want no error", side, got.err)
	case w.err == "" && got.listed == 0:
		t.Errorf("%s: listed no namespace of the member", side)
	case w.err != "" && (got.err == nil || !strings.Contains(got.err.Error(), w.err)):
		t.Errorf("%s: got error %v, want one saying %q", side, got.err, w.err)
	}
	if got.user != w.user {
		t.Errorf("%s: the member saw user %q, want %q", side, got.user, w.user)
	}
	if got.minted != w.minted {
		t.Errorf("%s: minted %q, want %q", side, got.minted, w.minted)
	}
	if got.err != nil && strings.Contains(got.err.Error(), "hunter2") {
		t.Errorf("%s: the error shows the address's password: %v", side, got.err)
	}
}

// Flux's generic provider (generic/provider_test.go), utils.GetRESTConfig
// and auth.GetRESTConfig (restconfig_test.go) on one hub and member: each
// ConfigMap read by Flux's path and by a fleet's WatchFlux.
func TestGenericSideBySide(t *testing.T) {
	e := setup(t)
	issuer, err := e.hub.ServiceAccountIssuer(testwait.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	a, ca := e.addr, e.ca
	data := func(kv ...string) map[string]string {
		m := map[string]string{"provider": "generic"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	user := e.member.User
	minted := func(ns, sa string, audiences ...string) string {
		return ns + "/" + sa + " for " + strings.Join(audiences, ",")
	}
	served := func(ns, sa string, audiences ...string) want {
		return want{user: user(ns, sa), minted: minted(ns, sa, audiences...)}
	}
	noScheme := strings.TrimPrefix(a, "https://")
	for i, c := range []struct {
		name       string
		cm         configMap
		flux, ours want
	}{
		{
			name: "NewRESTConfig/without audiences: the address is the audience",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca, "serviceAccountName", deployer)},
			flux: served(tenantNS, deployer, a), ours: served(tenantNS, deployer, a),
		},
		{
			name: "NewRESTConfig/with audiences",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca, "serviceAccountName", deployer, "audiences", a+"\nmember-extra")},
			flux: served(tenantNS, deployer, a, "member-extra"), ours: served(tenantNS, deployer, a, "member-extra"),
		},
		{
			name: "utils: audiences one per line, blanks left out",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca, "serviceAccountName", deployer, "audiences", " \n "+a+" \n\n")},
			flux: served(tenantNS, deployer, a), ours: served(tenantNS, deployer, a),
		},
		{
			name: "an audience the member does not take",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca, "serviceAccountName", deployer, "audiences", "member-other")},
			flux: want{err: "Unauthorized", minted: minted(tenantNS, deployer, "member-other")},
			// Ours shows the token to the member before handing it out, and
			// says which audience it refused.
			ours: want{err: "rejected the hub's token for audience member-other", minted: minted(tenantNS, deployer, "member-other")},
		},
		{
			name: "NewRESTConfig/address is required",
			cm:   configMap{ns: tenantNS, data: data("ca.crt", ca, "serviceAccountName", deployer)},
			flux: want{err: "cluster address is required", minted: minted(tenantNS, deployer, "")},
			// Ours refuses the ConfigMap before minting.
			ours: want{err: "no address key"},
		},
		{
			name: "no ca.crt: the system's roots",
			cm:   configMap{ns: tenantNS, data: data("address", a, "serviceAccountName", deployer)},
			flux: want{err: "x509", minted: minted(tenantNS, deployer, a)},
			ours: want{err: "x509", minted: minted(tenantNS, deployer, a)},
		},
		{
			name: "a ca.crt that is no PEM",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", "not a certificate", "serviceAccountName", deployer)},
			flux: want{err: "unable to load root certificates", minted: minted(tenantNS, deployer, a)},
			// Ours checks the member's TLS settings before minting.
			ours: want{err: "TLS settings"},
		},
		{
			name: "NewRESTConfig_EndToEnd: a ServiceAccount the member grants nothing",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca, "serviceAccountName", stranger)},
			flux: want{user: user(tenantNS, stranger), err: "forbidden", minted: minted(tenantNS, stranger, a)},
			ours: want{user: user(tenantNS, stranger), err: "forbidden", minted: minted(tenantNS, stranger, a)},
		},
		{
			name: "a ServiceAccount the hub does not have",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca, "serviceAccountName", "ghost")},
			flux: want{err: `serviceaccounts "ghost" not found`},
			ours: want{err: "the ServiceAccount does not exist", minted: minted(tenantNS, "ghost", a)},
		},
		{
			name: "another namespace's ServiceAccount",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca, "serviceAccountName", operatorNS+"/"+operatorSA)},
			flux: want{err: "failed to get service account"},
			// Ours refuses a name that is no ServiceAccount's name before
			// asking the hub anything.
			ours: want{err: "never another's"},
		},
		{
			name: "NewControllerToken/with audiences: no serviceAccountName, in the operator's namespace",
			cm:   configMap{ns: operatorNS, data: data("address", a, "ca.crt", ca), pod: true},
			flux: served(operatorNS, operatorSA, a), ours: served(operatorNS, operatorSA, a),
		},
		{
			name: "GetRESTConfig/from controller access token: no serviceAccountName, in a tenant's namespace",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca), pod: true},
			// Flux gives a tenant's ConfigMap the controller's own identity.
			flux: served(operatorNS, operatorSA, a),
			// Ours on purpose: the operator's own ServiceAccount serves the
			// ConfigMaps of its namespace only.
			ours: want{err: "serves only the ConfigMaps of its namespace"},
		},
		{
			name: "GetRESTConfig/lockdown: the default ServiceAccount of a ConfigMap that names none",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca), lockdown: remote},
			flux: served(tenantNS, remote, a), ours: served(tenantNS, remote, a),
		},
		{
			name: "lockdown: a default ServiceAccount the namespace does not have",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca), lockdown: "absent"},
			flux: want{err: "the specified default service account does not exist"},
			ours: want{err: "the ServiceAccount does not exist", minted: minted(tenantNS, "absent", a)},
		},
		{
			name: "GetRESTConfig/disable object level workload identity",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca, "serviceAccountName", deployer), gateOff: true},
			flux: want{err: "ObjectLevelWorkloadIdentity feature gate is not enabled"},
			// Ours has no gate: a ServiceAccount of the ConfigMap's own
			// namespace is all it may name.
			ours: served(tenantNS, deployer, a),
		},
		{
			name: "ParseClusterAddress/http",
			cm:   configMap{ns: tenantNS, data: data("address", "http://"+noScheme, "ca.crt", ca, "serviceAccountName", deployer, "audiences", a)},
			flux: want{err: "must use https scheme", minted: minted(tenantNS, deployer, a)},
			ours: want{err: "not an https URL"},
		},
		{
			name: "ParseClusterAddress/no scheme",
			cm:   configMap{ns: tenantNS, data: data("address", noScheme, "ca.crt", ca, "serviceAccountName", deployer, "audiences", a)},
			flux: served(tenantNS, deployer, a),
			// Ours on purpose: a token goes to an https URL the ConfigMap
			// spells out, and to nothing made of it.
			ours: want{err: "not an https URL"},
		},
		{
			name: "user info in the address",
			cm:   configMap{ns: tenantNS, data: data("address", "https://flux:hunter2@"+noScheme, "ca.crt", ca, "serviceAccountName", deployer, "audiences", a)},
			// Flux drops the user info and serves.
			flux: served(tenantNS, deployer, a),
			// Ours on purpose, and without repeating the password.
			ours: want{err: "not an https URL"},
		},
		{
			name: "the hub's own issuer as the audience",
			cm:   configMap{ns: tenantNS, data: data("address", a, "ca.crt", ca, "serviceAccountName", deployer, "audiences", issuer)},
			// Flux sends the member a token the hub takes; the member
			// refuses it.
			flux: want{err: "Unauthorized", minted: minted(tenantNS, deployer, issuer)},
			// Ours mints it, sees the hub's audience, and sends it nowhere.
			ours: want{err: "the hub would take it", minted: minted(tenantNS, deployer, issuer)},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cm.name = fmt.Sprintf("generic-%02d", i)
			put(t, e, c.cm)
			c.flux.check(t, "flux", viaFlux(t, e, c.cm, &mints{}))
			c.ours.check(t, "authvault", viaOurs(t, e, c.cm, &mints{}, fleet.FluxOptions{}))
		})
	}
}
