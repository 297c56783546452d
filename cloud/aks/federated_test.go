package aks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/hubtrust"
)

// Federated against a real hub (envtest, KUBEBUILDER_ASSETS) whose own API
// server is the member: its token webhook takes the tokens of the Entra ID
// stand-in, which checks the hub's tokens as Entra ID checks a federated
// identity credential's. One hub for every case.
func TestFederated(t *testing.T) {
	hub := hubtrust.StartHub(t)
	t.Run("exchange", func(t *testing.T) { testFederatedExchange(t, hub) })
	t.Run("expiration", func(t *testing.T) { testFederatedExpiration(t, hub) })
	t.Run("new hub token after expiry", func(t *testing.T) { testFederatedRenewal(t, hub) })
	t.Run("refusals", func(t *testing.T) { testFederatedRefusals(t, hub) })
	t.Run("not refusals", func(t *testing.T) { testFederatedFailures(t, hub) })
	t.Run("echoed request", func(t *testing.T) { testFederatedEcho(t, hub) })
	t.Run("flux", func(t *testing.T) { testFederatedFlux(t, hub) })
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// A client of the vault lists namespaces and is the application: the
// stand-in was asked once, for the AKS server application, with the hub's
// token for the ServiceAccount, which the hub itself refused.
func testFederatedExchange(t *testing.T, hub *hubtrust.Hub) {
	fv := startFed(t, hub, fedSetup{})
	ctx := ctxFor(t, time.Minute)
	cfg, err := fv.v.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hubtrust.WhoAmI(t, cfg), "aad:"+client; got != want {
		t.Errorf("SelfSubjectReview: %q, want %q", got, want)
	}

	if got, want := fv.e.asked(), []tokenRequest{{host: strings.TrimPrefix(fv.e.srv.URL, "https://"), client: client, scope: wantScope, grant: "federated " + hub.Subject()}}; !slices.Equal(got, want) {
		t.Errorf("the stand-in was asked %+v, want %+v", got, want)
	}
	assertions, refused := fv.e.presented()
	if len(assertions) != 1 || len(refused) != 0 {
		t.Fatalf("%d assertions presented, refusals %v: want one, taken", len(assertions), refused)
	}
	claims, err := hub.Trust(aks.FederatedAudience).Check(ctx, assertions[0])
	if err != nil {
		t.Fatalf("the assertion is no token of the hub's: %v", err)
	}
	if claims.Subject != hub.Subject() || !slices.Equal(claims.Audience, []string{aks.FederatedAudience}) {
		t.Errorf("the assertion's claims %+v, want subject %q, audience %q", claims, hub.Subject(), aks.FederatedAudience)
	}
	if _, rejected, _ := fv.auth.Counts(); rejected == 0 || !slices.Contains(fv.auth.Tokens(), assertions[0]) {
		t.Errorf("the hub's webhook refused %d tokens, want the hub's token among them (shown to the hub first)", rejected)
	}
	c, err := fv.v.Select(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Server != hub.Cluster.Server || string(c.Info.CAData) != string(hub.Cluster.CAData) {
		t.Errorf("the credential is for %s (CA %d bytes), want the member's %s and its CA", c.Info.Server, len(c.Info.CAData), hub.Cluster.Server)
	}
}

// The credential expires with Entra ID's token, whether it lives shorter
// or longer than the hub's token it came from (an hour).
func testFederatedExpiration(t *testing.T, hub *hubtrust.Hub) {
	for _, life := range []time.Duration{10 * time.Minute, 2 * time.Hour} {
		t.Run(life.String(), func(t *testing.T) {
			fv := startFed(t, hub, fedSetup{})
			fv.e.expiresIn.Store(int64(life / time.Second))
			before := time.Now()
			c, err := fv.v.Select(ctxFor(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Info.Expiration; got.Before(before.Add(life-time.Second)) || got.After(time.Now().Add(life)) {
				t.Errorf("the credential expires in %v, want Entra ID's token's %v", time.Until(got).Round(time.Second), life)
			}
		})
	}
}

// Entra ID's tokens live 2 s: after the first expires, a client still
// lists namespaces, with a token the hub minted for a later login.
func testFederatedRenewal(t *testing.T, hub *hubtrust.Hub) {
	fv := startFed(t, hub, fedSetup{login: []login.Option{login.Backoff(100*time.Millisecond, time.Second)}})
	fv.e.expiresIn.Store(2)
	ctx := ctxFor(t, time.Minute)
	cfg, err := fv.v.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, err := fv.v.Select(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if life := time.Until(first.Info.Expiration); life > 3*time.Second {
		t.Fatalf("the first credential expires in %v, want Entra ID's 2 s", life.Round(time.Second))
	}
	time.Sleep(time.Until(first.Info.Expiration) + 500*time.Millisecond)
	if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing namespaces after the first token expired: %v", err)
	}
	assertions, _ := fv.e.presented()
	if len(assertions) < 2 {
		t.Fatalf("%d hub tokens presented, want a new one after the first Entra ID token expired", len(assertions))
	}
	if len(slices.Compact(slices.Sorted(slices.Values(assertions)))) != len(assertions) {
		t.Errorf("a hub token was presented twice: each login must exchange the token minted for it")
	}
	if errs := fv.errors(); len(errs) > 0 {
		t.Errorf("the login failed: %v", errs)
	}
}

// Each refusal of the hub's token, by the stand-in's check of it
// (hubtrust) or as Entra ID answers it, is federation.ErrRejected, names
// the AADSTS code, and is not retried in the round.
func testFederatedRefusals(t *testing.T, hub *hubtrust.Hub) {
	later := func(tr *hubtrust.Trust) { tr.Now = func() time.Time { return time.Now().Add(2 * time.Hour) } }
	for _, c := range []struct {
		name    string
		setup   fedSetup
		refuse  int  // the stand-in answers this once its check passes
		checked bool // the stand-in's check of the token refused it
		code    int
	}{
		{name: "another audience", setup: fedSetup{audience: "api://another-audience"}, checked: true, code: 700212},
		{name: "another subject", setup: fedSetup{trust: func(tr *hubtrust.Trust) { tr.Subject = "system:serviceaccount:fleet-system:someone-else" }}, checked: true, code: 700213},
		{name: "another issuer", setup: fedSetup{trust: func(tr *hubtrust.Trust) { tr.Issuer = "https://127.0.0.1:1/another-issuer" }}, checked: true, code: 700211},
		{name: "expired: the stand-in's clock 2h ahead", setup: fedSetup{trust: later}, checked: true, code: 700024},
		{name: "no federated credential", refuse: 70025, code: 70025},
		{name: "subject case", refuse: 7002138, code: 7002138},
		{name: "invalid JWT", refuse: 50027, code: 50027},
		{name: "signature", refuse: 700027, code: 700027},
		{name: "issuer's keys unreachable", refuse: 50166, code: 50166},
	} {
		t.Run(c.name, func(t *testing.T) {
			fv := startFed(t, hub, c.setup)
			fv.e.fed.refuse.Store(int64(c.refuse))
			err := fv.selectErr(t, ctxFor(t, 15*time.Second))
			code := fmt.Sprintf("AADSTS%d", c.code)
			t.Log(err)
			if !errors.Is(err, federation.ErrRejected) || !strings.Contains(err.Error(), code) {
				t.Errorf("got %v, want federation.ErrRejected naming %s", err, code)
			}
			for _, err := range fv.errors() {
				if !errors.Is(err, federation.ErrRejected) {
					t.Errorf("the login's error %v is not federation.ErrRejected", err)
				}
			}
			if _, refused := fv.e.presented(); !slices.Equal(refused, []int{c.code}) {
				t.Errorf("the stand-in refused with %v, want [%d]", refused, c.code)
			}
			if c.checked && len(fv.e.asked()) != 0 {
				t.Errorf("the stand-in gave a token: %+v", fv.e.asked())
			}
			if n := fv.logins.Load(); n != 1 {
				t.Errorf("%d logins, want 1: a refusal is not retried in the round", n)
			}
		})
	}
}
