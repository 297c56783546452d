package aks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/hubtrust"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/vault"
)

// fedVault is a vault that reaches the hub's own API server as a member
// through Federated, with a stand-in of Entra ID whose application trusts
// the hub's ServiceAccount; the hub's token webhook accepts the tokens the
// stand-in issued (and so refuses the hub's own token, shown to it first).
type fedVault struct {
	hub  *hubtrust.Hub
	e    *entra
	auth *testcluster.Ledger
	logs testlog.Buffer
	v    *vault.Vault

	logins   atomic.Int32
	mu       sync.Mutex // guards errs, provided
	errs     []error    // every error of the login, and of Select
	provided []error    // every error of the provider
}

// fedSetup is what a test changes of the defaults.
type fedSetup struct {
	audience string                // minted for; default: aks.FederatedAudience
	trust    func(*hubtrust.Trust) // changes the federated identity credential
	opts     func(*aks.FederatedOptions)
	login    []login.Option
}

// member is the hub's own API server, as a member.
func member(hub *hubtrust.Hub) federation.Member {
	return federation.Member{Server: hub.Cluster.Server, CAData: hub.Cluster.CAData}
}

func startFed(t *testing.T, hub *hubtrust.Hub, s fedSetup) *fedVault {
	t.Helper()
	fv := &fedVault{hub: hub, e: newEntra(t)}
	trust := hub.Trust(aks.FederatedAudience)
	if s.trust != nil {
		s.trust(&trust)
	}
	fv.e.fed.trust.Store(&trust)
	// The API server's side of AKS: a token is good when Entra ID issued
	// it and it is neither expired nor revoked.
	fv.auth = testcluster.NewLedger(func(tok string) (string, error) {
		if why := fv.e.check(tok); why != "" {
			return "", errors.New(why)
		}
		return "aad:" + client, nil
	})
	hub.Cluster.Issuer.SetAccept(fv.auth.Accept)
	t.Cleanup(func() { hub.Cluster.Issuer.SetAccept(nil) })

	opts := aks.FederatedOptions{TenantID: tenant, ClientID: client}
	opts.CredentialOptions.ClientOptions = fv.e.clientOptions()
	opts.CredentialOptions.DisableInstanceDiscovery = true
	if s.opts != nil {
		s.opts(&opts)
	}
	audience := s.audience
	if audience == "" {
		audience = aks.FederatedAudience
	}
	// The provider's own errors are noted too: the federation login masks
	// the hub's token in them, and must not be what keeps it out.
	p := aks.Federated(opts)
	provider := federation.ProviderFunc(func(ctx context.Context, tok federation.Token, m federation.Member) (*login.ConnectionInfo, error) {
		info, err := p.Credential(ctx, tok, m)
		if err != nil {
			fv.mu.Lock()
			fv.provided = append(fv.provided, err)
			fv.mu.Unlock()
		}
		return info, err
	})
	h := federation.Login(hub.Config(audience, member(hub), provider))
	t.Cleanup(func() { fv.noSecrets(t) }) // after the vault is closed: its last lines are logged
	fv.v = vault.New(vault.Options{NoFallback: true, Logger: fv.logs.Logger(1)})
	t.Cleanup(fv.v.Close)
	fv.v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		fv.logins.Add(1)
		info, err := h(ctx)
		fv.note(err)
		return info, err
	}, append([]login.Option{login.ID("federated")}, s.login...)...)
	return fv
}

// note keeps err, when there is one, for noSecrets.
func (fv *fedVault) note(err error) {
	if err == nil {
		return
	}
	fv.mu.Lock()
	defer fv.mu.Unlock()
	fv.errs = append(fv.errs, err)
}

// errors returns the login's errors so far.
func (fv *fedVault) errors() []error {
	fv.mu.Lock()
	defer fv.mu.Unlock()
	return append([]error(nil), fv.errs...)
}

// selectErr is Select's error: the test wants one.
func (fv *fedVault) selectErr(t *testing.T, ctx context.Context) error {
	t.Helper()
	_, err := fv.v.Select(ctx)
	if err == nil {
		t.Fatal("Select gave a credential, want an error")
	}
	fv.note(err)
	return err
}

// noSecrets checks that no error and no log line holds a secret: a hub
// token, an Entra ID token, a token the hub's webhook was asked about.
func (fv *fedVault) noSecrets(t *testing.T) {
	assertions, _ := fv.e.presented()
	secrets := append(assertions, fv.auth.Tokens()...)
	fv.e.mu.Lock()
	for tok := range fv.e.tokens {
		secrets = append(secrets, tok)
	}
	fv.e.mu.Unlock()
	var texts []string
	fv.mu.Lock()
	all := append(append([]error(nil), fv.errs...), fv.provided...)
	fv.mu.Unlock()
	for _, err := range all {
		texts = append(texts, err.Error(), fmt.Sprintf("%v|%+v|%#v|%s|%q", err, err, err, err, err))
	}
	texts = append(texts, fv.logs.String())
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, text := range texts {
			if strings.Contains(text, s) {
				t.Errorf("a secret (%d bytes) is in an error or the log:\n%s", len(s), strings.ReplaceAll(text, s, "<SECRET>"))
			}
		}
	}
}
