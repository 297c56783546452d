package gke_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/hubtrust"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/vault"
)

const (
	// hubProvider is the pool provider that trusts the hub's issuer.
	hubProvider = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/fleet/providers/hub"
	// fleetSA is the service account the hub's ServiceAccount may impersonate.
	fleetSA = "fleet@authvault-test.iam.gserviceaccount.com"
)

// fed is one hub (a real API server, which is also the member: its token
// webhook takes a Google token once the stand-in's tokeninfo vouches for
// it, as GKE asks Google) and one Google stand-in whose pool provider
// trusts the hub's issuer, shared by TestFederated's subtests.
type fed struct {
	hub  *hubtrust.Hub
	g    *standIn
	auth *testcluster.Ledger
}

// pool is the stand-in's provider as the guide sets it up: the hub's
// issuer for AllowedAudience(hubProvider), a condition on the hub's
// ServiceAccount, and that principal allowed to impersonate fleetSA.
func (e *fed) pool() *pool {
	trust := e.hub.Trust(gke.AllowedAudience(hubProvider))
	trust.Subject = "" // the attribute condition checks it
	p := &pool{provider: hubProvider, trust: trust, subject: e.hub.Subject()}
	p.impersonators = map[string]string{fleetSA: p.principal(e.hub.Subject())}
	return p
}

// opts point Federated at the stand-in.
func (e *fed) opts() gke.FederatedOptions {
	return gke.FederatedOptions{Audience: hubProvider, TokenURL: e.g.srv.URL + "/sts", IAMCredentialsURL: e.g.srv.URL}
}

// config mints the hub's ServiceAccount tokens for the provider's allowed
// audience, for the hub's own API server as the member.
func (e *fed) config(opts gke.FederatedOptions) federation.Config {
	member := federation.Member{Server: e.hub.Cluster.Server, CAData: e.hub.Cluster.CAData}
	return e.hub.Config(gke.AllowedAudience(hubProvider), member, gke.Federated(opts))
}

// vault is a vault that logs in with cfg only.
func (e *fed) vault(t *testing.T, cfg federation.Config, opts ...login.Option) (*vault.Vault, *testlog.Buffer) {
	logs := &testlog.Buffer{}
	v := vault.New(vault.Options{NoFallback: true, Logger: logs.Logger(1)})
	t.Cleanup(v.Close)
	v.OnLogin(federation.Login(cfg), opts...)
	return v, logs
}

// noSecret fails t when any text shows a token: the hub's (those the
// stand-in was asked to exchange, those the hub's webhook saw) or
// Google's (every one the stand-in issued).
func (e *fed) noSecret(t *testing.T, texts ...string) {
	t.Helper()
	var secrets []string
	for _, tok := range slices.Concat(e.g.seen(), e.auth.Tokens(), e.g.issuedTokens()) {
		secrets = append(secrets, tok)
		// A piece of a JWT's claims or signature: a token quoted cut short.
		if parts := strings.Split(tok, "."); len(parts) == 3 {
			for _, part := range parts[1:] {
				secrets = append(secrets, part[:min(len(part), 16)])
			}
		}
	}
	for _, text := range texts {
		for _, s := range secrets {
			if s != "" && strings.Contains(text, s) {
				t.Errorf("a token (%.12s…) shows in:\n%s", s, text)
				return
			}
		}
	}
}

// printed is err in every form a caller may print it.
func printed(err error) string {
	return fmt.Sprintf("%v\n%+v\n%#v\n%q\n%s", err, err, err, err, err)
}

// clientOf lists namespaces through v and returns whom the member names.
func clientOf(t *testing.T, v *vault.Vault) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return hubtrust.WhoAmI(t, cfg)
}

// selected is v's credential, failing t when there is none.
func selected(t *testing.T, v *vault.Vault) *vault.Credential {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cred, err := v.Select(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// One hub for the binary's federation tests: each start costs seconds.
func TestFederated(t *testing.T) {
	e := &fed{hub: hubtrust.StartHub(t), g: newStandIn(t)}
	e.auth = testcluster.NewLedger(tokenInfo(e.g.srv.URL + "/tokeninfo"))
	e.hub.Cluster.Issuer.SetAccept(e.auth.Accept)
	for _, s := range []struct {
		name string
		run  func(*testing.T, *fed)
	}{
		{"the federated token is the member's credential", federatedToken},
		{"the impersonated token is the member's credential", impersonatedToken},
		{"a login after the Google token expires mints a new hub token", newHubTokenAfterExpiry},
		{"refusals of the hub's token are ErrRejected", refusals},
		{"a refused impersonation names the service account", refusedImpersonation},
		{"an STS down or failing is retried", stsDown},
		{"a Flux ConfigMap's member", fluxMember},
		{"a Flux ConfigMap's member with the default provider", fluxDefaultProvider},
	} {
		e.g.pool.Store(e.pool())
		e.g.expiresIn.Store(3600)
		e.g.impersonatedIn.Store(3600)
		t.Run(s.name, func(t *testing.T) { s.run(t, e) })
	}
}

// Without ServiceAccount, the STS's token goes to the member with the
// member's server and CA, until the Google token expires (20 min here,
// well before the hub token's hour); the member names the pool's
// principal for the hub's ServiceAccount; no impersonation is asked.
func federatedToken(t *testing.T, e *fed) {
	e.g.expiresIn.Store(1200)
	before, asked, iam := len(e.g.seen()), len(e.g.asked()), e.g.iamCalls.Load()
	v, logs := e.vault(t, e.config(e.opts()))
	cred := selected(t, v)
	if !strings.HasPrefix(cred.Info.Token, "ya29.sts-") {
		t.Errorf("the member's token is not the STS's")
	}
	if !near(cred.Info.Expiration, time.Now().Add(20*time.Minute)) {
		t.Errorf("expiration %v, want the Google token's, about %v", cred.Info.Expiration, time.Now().Add(20*time.Minute))
	}
	if cred.Info.Server != e.hub.Cluster.Server || string(cred.Info.CAData) != string(e.hub.Cluster.CAData) {
		t.Errorf("server %q and %d bytes of CA, want the member's", cred.Info.Server, len(cred.Info.CAData))
	}
	if got, want := clientOf(t, v), e.pool().principal(e.hub.Subject()); got != want {
		t.Errorf("the member names %q, want %q", got, want)
	}
	if got := len(e.g.seen()) - before; got != 1 {
		t.Errorf("%d hub tokens exchanged, want 1", got)
	}
	if got := e.g.asked()[asked:]; len(got) != 1 || !slices.Equal(slices.Sorted(slices.Values(got[0])), []string{scope, emailScope}) {
		t.Errorf("scopes asked: %q, want %s and %s", got, scope, emailScope)
	}
	if got := e.g.iamCalls.Load() - iam; got != 0 {
		t.Errorf("%d impersonations, want none", got)
	}
	if !strings.Contains(logs.String(), "gke: federated access token") {
		t.Errorf("no V(1) line for the exchange:\n%s", logs)
	}
	e.noSecret(t, logs.String())
}

// With ServiceAccount, the STS's token (scoped cloud-platform) goes to
// generateAccessToken, and the member's credential is the impersonated
// token, until it expires (30 min here, before the STS token's hour); the
// member names the service account.
func impersonatedToken(t *testing.T, e *fed) {
	e.g.impersonatedIn.Store(1800)
	sts, iam, asked := e.g.stsCalls.Load(), e.g.iamCalls.Load(), len(e.g.asked())
	opts := e.opts()
	opts.ServiceAccount = fleetSA
	v, logs := e.vault(t, e.config(opts))
	cred := selected(t, v)
	if !strings.HasPrefix(cred.Info.Token, "ya29.imp-") {
		t.Errorf("the member's token is not the impersonated one")
	}
	if !near(cred.Info.Expiration, time.Now().Add(30*time.Minute)) {
		t.Errorf("expiration %v, want the impersonated token's, about %v", cred.Info.Expiration, time.Now().Add(30*time.Minute))
	}
	if got := clientOf(t, v); got != fleetSA {
		t.Errorf("the member names %q, want %q", got, fleetSA)
	}
	if s, i := e.g.stsCalls.Load()-sts, e.g.iamCalls.Load()-iam; s != 1 || i != 1 {
		t.Errorf("%d exchanges and %d impersonations, want one of each", s, i)
	}
	got := e.g.asked()[asked:]
	if len(got) != 2 || !slices.Equal(got[0], []string{scope}) || !slices.Equal(slices.Sorted(slices.Values(got[1])), []string{scope, emailScope}) {
		t.Errorf("scopes asked: %q, want cloud-platform at the exchange, then %s and %s", got, scope, emailScope)
	}
	e.noSecret(t, logs.String())
}

// The vault logs in again before the Google token (3 s) expires, and
// every login mints a new hub token: none is exchanged twice, though
// each lives an hour.
func newHubTokenAfterExpiry(t *testing.T, e *fed) {
	e.g.expiresIn.Store(3)
	before := len(e.g.seen())
	v, logs := e.vault(t, e.config(e.opts()))
	first := selected(t, v)
	clientOf(t, v)
	if left := time.Until(first.Info.Expiration); left > 10*time.Second {
		t.Fatalf("the credential expires in %v, want the Google token's 3 s", left)
	}
	time.Sleep(time.Until(first.Info.Expiration) + 500*time.Millisecond)
	clientOf(t, v)
	if next := selected(t, v); !next.Info.Expiration.After(first.Info.Expiration) {
		t.Errorf("the credential expires at %v, no later than the first (%v)", next.Info.Expiration, first.Info.Expiration)
	}
	seen := e.g.seen()[before:]
	if len(seen) < 2 {
		t.Errorf("%d hub tokens exchanged, want a new one after the Google token expired", len(seen))
	}
	if len(slices.Compact(slices.Sorted(slices.Values(seen)))) != len(seen) {
		t.Errorf("a hub token was exchanged twice, want a new one at each login")
	}
	e.noSecret(t, logs.String())
}
