package aks_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

const server = "https://prod-dns-1a2b3c.hcp.westeurope.azmk8s.io:443"

func opts(cred azcore.TokenCredential) aks.Options {
	return aks.Options{Server: server, CAData: testCA(), Credential: cred}
}

// near tells whether got is within a few seconds of want.
func near(got, want time.Time) bool {
	d := got.Sub(want)
	return d > -5*time.Second && d < 5*time.Second
}

func TestLogin(t *testing.T) {
	e := newEntra(t)
	for _, tc := range []struct {
		name  string
		login func() login.Handler
	}{
		{"client secret", func() login.Handler { return aks.Login(opts(e.secretCredential())) }},
		{"client assertion", func() login.Handler { return aks.Login(opts(e.assertionCredential())) }},
		{"default credential", func() login.Handler { setEnv(t); return aks.LoginWith(opts(nil), time.Now, e.newDefault) }},
		{"workload identity", func() login.Handler { setWorkloadEnv(t); return aks.LoginWith(opts(nil), time.Now, e.newDefault) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.issued.Load()
			info, err := tc.login()(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprint("eyJ.aks-", before+1); info.Token != want {
				t.Errorf("token: got %q, want %q", info.Token, want)
			}
			if !near(info.Expiration, e.expiry()) {
				t.Errorf("expiration: got %v, want about %v", info.Expiration, e.expiry())
			}
			if info.Server != server || !bytes.Equal(info.CAData, testCA()) {
				t.Errorf("server and CA: got %q and %d bytes", info.Server, len(info.CAData))
			}
		})
	}
}

func TestRequiredOptions(t *testing.T) {
	for _, o := range []aks.Options{{CAData: testCA()}, {Server: server}} {
		_, err := aks.Login(o)(context.Background())
		var permanent *login.PermanentError
		if !errors.As(err, &permanent) {
			t.Errorf("%+v: got %v, want a permanent error", o, err)
		}
	}
}

// Only a first login takes the token the handler has, and only while more
// than half its lifetime is left; every other login gets a new token from a
// new DefaultAzureCredential, whose cache is empty.
func TestFreshTokens(t *testing.T) {
	e := newEntra(t)
	setEnv(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	h := aks.LoginWith(opts(nil), clock, e.newDefault)
	steps := []struct {
		kind    login.ReasonKind
		advance time.Duration
		want    string
	}{
		{login.FirstLogin, 0, "eyJ.aks-1"},
		{login.FirstLogin, 0, "eyJ.aks-1"}, // another vault's first login: shared
		{login.Refresh, 0, "eyJ.aks-2"},
		{login.Rejected, 0, "eyJ.aks-3"},
		{login.Expired, 0, "eyJ.aks-4"},
		{login.FirstLogin, 29 * time.Minute, "eyJ.aks-4"}, // 31 of 60 min left
		{login.FirstLogin, 2 * time.Minute, "eyJ.aks-5"},  // 29 left: not fresh enough
	}
	for i, s := range steps {
		advance(s.advance)
		info, err := h(login.WithReason(context.Background(), login.Reason{Kind: s.kind}))
		if err != nil {
			t.Fatal(err)
		}
		if info.Token != s.want {
			t.Errorf("step %d (%s): got %q, want %q", i, s.kind, info.Token, s.want)
		}
	}
}

// An Entra ID that echoes its request in its error must not put the client
// secret or the assertion in the login's error or log.
func TestErrorsQuoteNoSecret(t *testing.T) {
	e := newEntra(t)
	e.echo.Store(true)
	for _, tc := range []struct {
		name, from string
		login      func() login.Handler
	}{
		{"client secret", "the given *azidentity.ClientSecretCredential", func() login.Handler { return aks.Login(opts(e.secretCredential())) }},
		{"client assertion", "the given *azidentity.ClientAssertionCredential", func() login.Handler { return aks.Login(opts(e.assertionCredential())) }},
		{"default credential", `DefaultAzureCredential (service principal "` + client + `", client secret from the environment)`,
			func() login.Handler { setEnv(t); return aks.LoginWith(opts(nil), time.Now, e.newDefault) }},
		{"workload identity", `DefaultAzureCredential (workload identity "` + client + `")`,
			func() login.Handler { setWorkloadEnv(t); return aks.LoginWith(opts(nil), time.Now, e.newDefault) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			log := funcr.New(func(p, a string) { fmt.Fprintln(&logs, p, a) }, funcr.Options{Verbosity: 9})
			_, err := tc.login()(logr.NewContext(context.Background(), log))
			if err == nil {
				t.Fatal("got no error from an endpoint that answers 401")
			}
			log.Error(err, "login failed")
			var permanent *login.PermanentError
			if !errors.As(err, &permanent) {
				t.Errorf("got %v, want a permanent error for a 401", err)
			}
			for _, want := range []string{"aks: ", server, tc.from, "POST " + e.srv.URL + "/" + tenant + "/oauth2/v2.0/token: HTTP 401 invalid_client (AADSTS7000215)"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			shown := strings.Join([]string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), logs.String()}, "\n")
			for _, s := range []string{secret, assertion} {
				if strings.Contains(shown, s) {
					t.Errorf("a secret shows in %q", shown)
				}
			}
		})
	}
}

func TestCanceledLoginReturnsPromptly(t *testing.T) {
	e := newEntra(t)
	e.hang.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := aks.Login(opts(e.secretCredential()))(ctx)
		done <- err
	}()
	time.AfterFunc(100*time.Millisecond, cancel)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(testwait.Hang): // the endpoint hangs: only the cancellation ends the login
		t.Fatalf("the login did not return within %v of its cancellation", testwait.Hang)
	}
}

// A vault serves the token and, before it expires, a new one.
func TestVaultRefreshesBeforeExpiry(t *testing.T) {
	e := newEntra(t)
	// Tokens of 10 s, not 6: the refresh starts when a quarter to a half
	// of their usable 9 s is left, which leaves a busy machine's timer and
	// login seconds to spare; the promise, not the scheduler, decides.
	const lifetime = 10 * time.Second
	e.expiresIn.Store(int64(lifetime / time.Second))
	v := vault.New(vault.Options{NoFallback: true, Leeway: time.Second})
	defer v.Close()
	v.OnLogin(aks.Login(opts(e.secretCredential())), login.ID("aks"))
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	first, err := v.Select(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Info.Token != "eyJ.aks-1" {
		t.Fatalf("first token: got %q", first.Info.Token)
	}
	for {
		cred, err := v.Select(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cred.Info.Token != first.Info.Token {
			if cred.Info.Token != "eyJ.aks-2" || !cred.Info.Expiration.After(first.Info.Expiration) {
				t.Errorf("the refresh gave %q until %v", cred.Info.Token, cred.Info.Expiration)
			}
			// When the login got it (its expiry less its lifetime), not
			// when this loop, which a busy machine may run late, saw it.
			if got := cred.Info.Expiration.Add(-lifetime); !got.Before(first.Info.Expiration) {
				t.Errorf("the new token came at %v, after the first expired at %v", got, first.Info.Expiration)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no refresh within 20 s")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
