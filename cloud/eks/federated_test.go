package eks_test

import (
	"bytes"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/testkit/hubtrust"
	"github.com/authvault/authvault/testkit/testwait"
)

// The EKS federation provider end to end, on one real hub (a
// kube-apiserver serving its issuer discovery) whose ServiceAccount tokens
// the STS stand-in checks as STS checks them (hubtrust: the signature
// against the hub's JWKS, issuer, audience, expiry, and the role's
// subject); the hub's API server stands in for the members, its webhook
// taking an EKS token once the stand-in answers its presigned
// GetCallerIdentity. KUBEBUILDER_ASSETS must name the envtest binaries.
func TestFederated(t *testing.T) {
	hub := hubtrust.StartHub(t)
	t.Run("exchange", func(t *testing.T) { testFederatedExchange(t, hub) })
	t.Run("chain", func(t *testing.T) { testFederatedChain(t, hub) })
	t.Run("role per member", func(t *testing.T) { testFederatedRolePerMember(t, hub) })
	t.Run("expiration", func(t *testing.T) { testFederatedExpiration(t, hub) })
	t.Run("refresh mints a new hub token", func(t *testing.T) { testFederatedRefresh(t, hub) })
	t.Run("refusals", func(t *testing.T) { testFederatedRefusals(t, hub) })
	t.Run("unavailable", func(t *testing.T) { testFederatedUnavailable(t, hub) })
	t.Run("flux", func(t *testing.T) { testFederatedFlux(t, hub) })
}

// The hub's token becomes the role's session (one AssumeRoleWithWebIdentity,
// session name SessionName), whose EKS token goes to the member's server
// with its CA: a client of the vault lists namespaces there as the role.
// The hub saw the minted token first, and its webhook refused it.
func testFederatedExchange(t *testing.T, hub *hubtrust.Hub) {
	e := newFedEnv(t, hub)
	v := e.vault(t, e.config(e.options(fedRole)))
	if got, want := whoAmI(t, v), session(fedRole); got != want {
		t.Errorf("the member sees %q, want %q", got, want)
	}
	if got := e.sts.count("AssumeRoleWithWebIdentity"); got != 1 {
		t.Errorf("%d AssumeRoleWithWebIdentity, want 1", got)
	}
	if got := e.sts.count("AssumeRole"); got != 0 {
		t.Errorf("%d AssumeRole, want none without ChainRoleARN", got)
	}
	if issued := e.sts.issues(); len(issued) != 1 || issued[0].session != eks.SessionName {
		t.Errorf("issued %+v, want one session named %q", issued, eks.SessionName)
	}
	cred, err := v.Select(testwait.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if cred.Info.Server != hub.Cluster.Server || !bytes.Equal(cred.Info.CAData, hub.Cluster.CAData) {
		t.Errorf("the credential goes to %s with %d bytes of CA, want the member's %s and CA", cred.Info.Server, len(cred.Info.CAData), hub.Cluster.Server)
	}
	if code, body := e.sts.callPresigned(t, presignedURL(t, cred.Info.Token), testCluster); code != http.StatusOK {
		t.Errorf("the EKS token does not verify for %s: %d %s", testCluster, code, body)
	}
	if _, rejected, why := e.ledger.Counts(); rejected == 0 {
		t.Errorf("the hub's webhook refused no token (%q): the minted one must be refused there", why)
	}
}

// With ChainRoleARN, STS sees AssumeRoleWithWebIdentity, then AssumeRole
// of the chained role signed with the web identity session's keys; the
// EKS token speaks for the chained role.
func testFederatedChain(t *testing.T, hub *hubtrust.Hub) {
	e := newFedEnv(t, hub)
	opts := e.options(fedRole)
	opts.ChainRoleARN = testRoleARN
	v := e.vault(t, e.config(opts))
	if got, want := whoAmI(t, v), session(testRoleARN); got != want {
		t.Errorf("the member sees %q, want the chained role's %q", got, want)
	}
	issued := e.sts.issues()
	if len(issued) != 2 || issued[0].action != "AssumeRoleWithWebIdentity" || issued[1].action != "AssumeRole" {
		t.Fatalf("issued %+v, want AssumeRoleWithWebIdentity then AssumeRole", issued)
	}
	if got, want := issued[0].arn, session(fedRole); got != want {
		t.Errorf("the web identity session is %q, want %q", got, want)
	}
	if got, want := e.sts.roles(), []string{testRoleARN}; !slices.Equal(got, want) {
		t.Errorf("AssumeRole asked for %q, want %q", got, want)
	}
	if got, want := e.sts.signers(), []string{issued[0].keyID}; !slices.Equal(got, want) {
		t.Errorf("AssumeRole signed with %q, want the web identity session's %q", got, want)
	}
}

// Two members, two roles: each vault's token is for its own cluster name
// and speaks for its own role.
func testFederatedRolePerMember(t *testing.T, hub *hubtrust.Hub) {
	e := newFedEnv(t, hub, "prod", "staging")
	prod := e.options(fedRole)
	staging := e.options(fedStagingRole)
	staging.Cluster = "staging"
	for _, m := range []struct {
		opts  eks.FederatedOptions
		other string
	}{{prod, "staging"}, {staging, "prod"}} {
		v := e.vault(t, e.config(m.opts))
		if got, want := whoAmI(t, v), session(m.opts.RoleARN); got != want {
			t.Errorf("member %s sees %q, want %q", m.opts.Cluster, got, want)
		}
		cred, err := v.Select(testwait.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		u := presignedURL(t, cred.Info.Token)
		if code, body := e.sts.callPresigned(t, u, m.opts.Cluster); code != http.StatusOK {
			t.Errorf("member %s's token does not verify for its cluster: %d %s", m.opts.Cluster, code, body)
		}
		if code, _ := e.sts.callPresigned(t, u, m.other); code == http.StatusOK {
			t.Errorf("member %s's token verifies for cluster %s too", m.opts.Cluster, m.other)
		}
	}
}

// The credential expires when the first of what makes it stops working:
// the presigned URL (14 minutes after signing), the session that signed
// it, the web identity session under a chain.
func testFederatedExpiration(t *testing.T, hub *hubtrust.Hub) {
	for _, c := range []struct {
		name      string
		chain     bool
		web, role time.Duration // session lifetimes
		want      func(issued []issue, signed time.Time) time.Time
	}{
		{"the EKS token", false, time.Hour, time.Hour, func(_ []issue, signed time.Time) time.Time { return signed.Add(14 * time.Minute) }},
		{"the web identity session", false, 5 * time.Minute, time.Hour, func(issued []issue, _ time.Time) time.Time { return issued[0].expires }},
		{"the chained session", true, time.Hour, 4 * time.Minute, func(issued []issue, _ time.Time) time.Time { return issued[1].expires }},
		{"the web identity session under a chain", true, 3 * time.Minute, time.Hour, func(issued []issue, _ time.Time) time.Time { return issued[0].expires }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFedEnv(t, hub)
			e.sts.webLifetime, e.sts.lifetime = c.web, c.role
			opts := e.options(fedRole)
			if c.chain {
				opts.ChainRoleARN = testRoleARN
			}
			cred, err := e.vault(t, e.config(opts)).Select(testwait.Context(t))
			if err != nil {
				t.Fatal(err)
			}
			signed, err := time.Parse(amzDateLayout, presignedURL(t, cred.Info.Token).Query().Get("X-Amz-Date"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := cred.Info.Expiration, c.want(e.sts.issues(), signed).Truncate(time.Millisecond); !got.Equal(want) {
				t.Errorf("expiration %v, want %v", got, want)
			}
		})
	}
}

// The web identity session lasts 8 s, so does each EKS token: the vault
// logs in again, which mints a new hub token for a new exchange, and its
// client works on once the first session has expired.
func testFederatedRefresh(t *testing.T, hub *hubtrust.Hub) {
	e := newFedEnv(t, hub)
	e.sts.webLifetime = 8 * time.Second
	v := e.vault(t, e.config(e.options(fedRole)))
	whoAmI(t, v)
	testwait.For(t, "a second exchange", func() bool { return e.sts.count("AssumeRoleWithWebIdentity") >= 2 })
	presented := e.trust.presented()
	if len(presented) < 2 || presented[0] == presented[1] {
		t.Errorf("the second exchange presented the first hub token again, want a new one")
	}
	time.Sleep(time.Until(e.sts.issues()[0].expires)) // the first session ends
	if got, want := whoAmI(t, v), session(fedRole); got != want {
		t.Errorf("after the first session, the member sees %q, want %q", got, want)
	}
}
