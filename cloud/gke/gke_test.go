package gke_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

const server = "https://34.118.0.10"

func opts(json []byte) gke.Options {
	return gke.Options{Server: server, CAData: testCA(), CredentialsJSON: json}
}

// near tells whether got is within a few seconds of want.
func near(got, want time.Time) bool {
	d := got.Sub(want)
	return d > -5*time.Second && d < 5*time.Second
}

// Login gets a token from each kind of credentials, for the scopes
// gke-gcloud-auth-plugin asks.
func TestLogin(t *testing.T) {
	g := newStandIn(t)
	for _, tc := range []struct {
		name  string
		opts  func() gke.Options
		token string
	}{
		{"service account key", func() gke.Options { return opts(g.keyJSON()) }, "ya29.sa-"},
		{"external account", func() gke.Options { return opts(g.externalJSON()) }, "ya29.sts-"},
		{"credentials with JSON", func() gke.Options {
			o := opts(nil)
			creds, err := google.CredentialsFromJSONWithType(context.Background(), g.keyJSON(), google.ServiceAccount, gke.DefaultScope)
			if err != nil {
				t.Fatal(err)
			}
			o.Credentials = creds
			return o
		}, "ya29.sa-"},
		{"default credentials", func() gke.Options {
			path := t.TempDir() + "/key.json"
			if err := writeFile(path, g.keyJSON()); err != nil {
				t.Fatal(err)
			}
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
			return opts(nil)
		}, "ya29.sa-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, asked := g.issued.Load(), len(g.asked())
			info, err := gke.Login(tc.opts())(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// gke-gcloud-auth-plugin's: with userinfo.email, GKE names a
			// service account by its email, as RBAC bindings do.
			if got := g.asked()[asked:]; len(got) != 1 || !slices.Equal(slices.Sorted(slices.Values(got[0])), []string{scope, emailScope}) {
				t.Errorf("scopes asked: %q, want %s and %s, as the plugin asks", got, scope, emailScope)
			}
			if want := fmt.Sprint(tc.token, before+1); info.Token != want {
				t.Errorf("token: got %q, want %q", info.Token, want)
			}
			if !near(info.Expiration, g.expiry()) {
				t.Errorf("expiration: got %v, want about %v", info.Expiration, g.expiry())
			}
			if info.Server != server || !bytes.Equal(info.CAData, testCA()) {
				t.Errorf("server and CA: got %q and %d bytes", info.Server, len(info.CAData))
			}
		})
	}
}

func TestGivenTokenSource(t *testing.T) {
	exp := time.Now().Add(time.Hour).Round(time.Second)
	o := opts(nil)
	o.Credentials = &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "given", Expiry: exp})}
	info, err := gke.Login(o)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Token != "given" || !info.Expiration.Equal(exp) {
		t.Errorf("got %q until %v, want %q until %v", info.Token, info.Expiration, "given", exp)
	}
}

func TestRequiredOptions(t *testing.T) {
	both := opts([]byte(`{}`))
	both.Credentials = &google.Credentials{JSON: []byte(`{}`)}
	for _, o := range []gke.Options{{CAData: testCA()}, {Server: server}, both} {
		_, err := gke.Login(o)(context.Background())
		var permanent *login.PermanentError
		if !errors.As(err, &permanent) {
			t.Errorf("%+v: got %v, want a permanent error", o, err)
		}
	}
}

// Only a first login takes the token the handler has, and only while more
// than half its lifetime is left: every other login is the vault replacing
// that token, and must get a new one.
func TestFreshTokens(t *testing.T) {
	g := newStandIn(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	h := gke.LoginAt(opts(g.keyJSON()), clock)
	as := func(kind login.ReasonKind) string {
		t.Helper()
		info, err := h(login.WithReason(context.Background(), login.Reason{Kind: kind}))
		if err != nil {
			t.Fatal(err)
		}
		return info.Token
	}
	steps := []struct {
		kind    login.ReasonKind
		advance time.Duration
		want    string
	}{
		{login.FirstLogin, 0, "ya29.sa-1"},
		{login.FirstLogin, 0, "ya29.sa-1"}, // another vault's first login: shared
		{login.Refresh, 0, "ya29.sa-2"},
		{login.Rejected, 0, "ya29.sa-3"},
		{login.Expired, 0, "ya29.sa-4"},
		{login.FirstLogin, 29 * time.Minute, "ya29.sa-4"}, // 31 of 60 min left
		{login.FirstLogin, 2 * time.Minute, "ya29.sa-5"},  // 29 left: not fresh enough
		{"", 0, "ya29.sa-5"},                              // a caller other than a vault
	}
	for i, s := range steps {
		advance(s.advance)
		if got := as(s.kind); got != s.want {
			t.Errorf("step %d (%s): got %q, want %q", i, s.kind, got, s.want)
		}
	}
}

// An endpoint that echoes its request (here, in an OAuth2 error's
// description) must not put the assertion, the key or the subject token in
// the login's error or log.
func TestErrorsQuoteNoSecret(t *testing.T) {
	g := newStandIn(t)
	g.echo.Store(true)
	key := g.keyJSON()
	for _, tc := range []struct {
		name, json, from, url string
		secrets               func() []string
	}{
		{"service account key", string(key), `service account key "` + saEmail + `"`, g.srv.URL + "/token",
			func() []string { return []string{g.lastAssertion(), pemBody(testKeyPEM())} }},
		{"external account", string(g.externalJSON()), `external account "` + audience + `"`, g.srv.URL + "/sts",
			func() []string { return []string{g.subjectToken} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			log := funcr.New(func(p, a string) { fmt.Fprintln(&logs, p, a) }, funcr.Options{Verbosity: 9})
			ctx := logr.NewContext(context.Background(), log)
			_, err := gke.Login(opts([]byte(tc.json)))(ctx)
			if err == nil {
				t.Fatal("got no error from an endpoint that answers 400")
			}
			log.Error(err, "login failed")
			var permanent *login.PermanentError
			if !errors.As(err, &permanent) {
				t.Errorf("got %v, want a permanent error for a 400", err)
			}
			shown := strings.Join([]string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), logs.String()}, "\n")
			for _, want := range []string{"gke: ", server, tc.from, "POST " + tc.url, "HTTP 400 invalid_grant"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			for _, secret := range tc.secrets() {
				if secret == "" {
					t.Fatal("the stand-in saw no secret")
				}
				if strings.Contains(shown, secret) {
					t.Errorf("a secret shows in %q", shown)
				}
			}
		})
	}
}

func TestCanceledLoginReturnsPromptly(t *testing.T) {
	g := newStandIn(t)
	g.hang.Store(true)
	for _, tc := range []struct{ name, json string }{
		{"service account key", string(g.keyJSON())},
		{"external account", string(g.externalJSON())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := gke.Login(opts([]byte(tc.json)))(ctx)
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
		})
	}
}

// A vault serves the token and, before it expires, a new one.
func TestVaultRefreshesBeforeExpiry(t *testing.T) {
	g := newStandIn(t)
	// Tokens of 10 s, not 6: the refresh starts when a quarter to a half
	// of their usable 9 s is left, which leaves a busy machine's timer and
	// login seconds to spare; the promise, not the scheduler, decides.
	const lifetime = 10 * time.Second
	g.expiresIn.Store(int64(lifetime / time.Second))
	v := vault.New(vault.Options{NoFallback: true, Leeway: time.Second})
	defer v.Close()
	v.OnLogin(gke.Login(opts(g.keyJSON())), login.ID("gke"))
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	first, err := v.Select(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Info.Token != "ya29.sa-1" {
		t.Fatalf("first token: got %q", first.Info.Token)
	}
	for {
		cred, err := v.Select(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cred.Info.Token != first.Info.Token {
			if cred.Info.Token != "ya29.sa-2" || !cred.Info.Expiration.After(first.Info.Expiration) {
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
			t.Fatalf("no refresh within %v", testwait.Hang)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// A token source of the caller's, whose requests the handler does not see,
// fails with oauth2's RetrieveError, whose text quotes the endpoint's
// error description: the login's error keeps the status alone.
func TestGivenTokenSourceErrorQuotesNoSecret(t *testing.T) {
	echo := "echoed-assertion-never-shown"
	o := opts(nil)
	o.Credentials = &google.Credentials{TokenSource: failingSource{&oauth2.RetrieveError{
		Response:  &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request"},
		Body:      []byte(`{"error":"invalid_grant","error_description":"` + echo + `"}`),
		ErrorCode: "invalid_grant", ErrorDescription: "you sent " + echo,
	}}}
	_, err := gke.Login(o)(context.Background())
	var permanent *login.PermanentError
	if err == nil || strings.Contains(fmt.Sprintf("%v %+v", err, err), echo) || !strings.Contains(err.Error(), "HTTP 400") || !errors.As(err, &permanent) {
		t.Errorf("got %v, want a permanent error with HTTP 400 and no echo", err)
	}
}

type failingSource struct{ err error }

func (s failingSource) Token() (*oauth2.Token, error) { return nil, s.err }
