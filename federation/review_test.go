package federation

// An adversarial review's tests: each names the behaviour it pins. Those
// marked "was:" failed on the code the review read.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

// rawHub answers every TokenRequest with what mint returns: a token and
// whether to give an expirationTimestamp.
func rawHub(t *testing.T, mint func() (token string, exp *time.Time)) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" { // the hub refuses the member's token
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		calls.Add(1)
		var req authenticationv1.TokenRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		tok, exp := mint()
		req.Status = authenticationv1.TokenRequestStatus{Token: tok}
		if exp != nil {
			req.Status.ExpirationTimestamp = metav1.NewTime(*exp)
		}
		req.Kind, req.APIVersion = "TokenRequest", "authentication.k8s.io/v1"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&req)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func signES256(t *testing.T, kid string, claims jwt.Claims) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := sign(key, kid, claims)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func rawConfig(hub *httptest.Server, m *fakeMember) Config {
	return Config{
		Hub:       &rest.Config{Host: hub.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}},
		Namespace: "fleet", ServiceAccount: "op",
		Audiences: []string{"member-1"},
		Member:    m.member(),
	}
}

// was: a user name in Member.Server may be a token (https://TOKEN@host,
// as package redact says); url.URL.Redacted hides only the password.
func TestReviewServerUserNameIsNotInTheError(t *testing.T) {
	hub := newFakeHub(t)
	for _, server := range []string{"https://s3cr3t-tok@member-1.example", "http://s3cr3t-tok@member-1.example"} {
		cfg := hub.config()
		cfg.Member.Server = server
		_, err := Login(cfg)(as(login.FirstLogin))
		if err == nil || strings.Contains(err.Error(), "s3cr3t-tok") {
			t.Errorf("%s: error %v holds the user name", server, err)
		}
	}
}

// was: url.Parse's error quotes the whole URL, password included;
// Member.check wraps it unredacted.
func TestReviewUnparsableServerPasswordIsNotInTheError(t *testing.T) {
	hub := newFakeHub(t)
	cfg := hub.config()
	cfg.Member.Server = "https://u:pa ss-hunter2@member-1.example"
	_, err := Login(cfg)(as(login.FirstLogin))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v holds the password", err)
	}
}

// was: a Provider (a cloud STS) may quote the token back; Login wraps
// its error with redact.Error, which hides URL user info, not the token.
func TestReviewAProvidersEchoOfTheTokenIsMasked(t *testing.T) {
	hub := newFakeHub(t)
	for _, wrap := range []func(string) error{
		func(tok string) error { return fmt.Errorf("%w: sts said invalid assertion %s", ErrRejected, tok) },
		func(tok string) error { return fmt.Errorf("sts 500: grant %s", tok) },
	} {
		cfg := hub.config()
		cfg.Provider = ProviderFunc(func(_ context.Context, tok Token, _ Member) (*login.ConnectionInfo, error) {
			return nil, wrap(tok.Value())
		})
		_, err := Login(cfg)(as(login.FirstLogin))
		if err == nil {
			t.Fatal("no error")
		}
		for _, minted := range hub.minted {
			if strings.Contains(err.Error(), minted) {
				t.Errorf("error %q holds the token", err)
			}
		}
	}
}

// was: a member that accepts the connection and never answers holds the
// login forever when the vault gives no deadline (login.Timeout's default
// is none, and neither the package doc nor the example sets one). The
// probe should bound itself (30 s here).
func TestReviewAMemberThatNeverAnswersDoesNotHoldTheLogin(t *testing.T) {
	defer func(d time.Duration) { showTimeout = d }(showTimeout)
	showTimeout = 200 * time.Millisecond
	hub := newFakeHub(t)
	release := make(chan struct{})
	hub.member.srv.Config.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })
	done := make(chan error, 1)
	go func() { _, err := Login(hub.config())(context.Background()); done <- err }()
	defer func() { close(release); <-done }()
	select {
	case <-done:
		done <- nil
	case <-time.After(testwait.Hang):
		t.Errorf("the login still waits on a member that never answers, %v on (its check's timeout: %v)", testwait.Hang, showTimeout)
	}
}

// The probe honours its context.
func TestReviewTheProbeHonoursItsContext(t *testing.T) {
	hub := newFakeHub(t)
	release := make(chan struct{})
	hub.member.srv.Config.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })
	defer close(release)
	ctx, cancel := context.WithTimeout(as(login.FirstLogin), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Login(hub.config())(ctx)
	if err == nil || time.Since(start) > 5*time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("after %v: error %v, want the context's deadline", time.Since(start), err)
	}
}

// A member that answers with an endless body does not hold the login.
func TestReviewAnEndlessBodyDoesNotHoldTheLogin(t *testing.T) {
	hub := newFakeHub(t)
	hub.member.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	ctx, cancel := context.WithTimeout(as(login.FirstLogin), 20*time.Second)
	defer cancel()
	if _, err := Login(hub.config())(ctx); err != nil {
		t.Errorf("error %v", err)
	}
}

// Whatever the hub returns as a token, nothing panics, the error holds
// no token, and one that is not a member's JWT never reaches the member. A
// JWT with no kid is a token like any other.
func TestReviewOddTokensFromTheHub(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	good := jwt.Claims{Issuer: hubIssuer, Subject: "system:serviceaccount:fleet:op", Audience: jwt.Audience{"member-1"}, Expiry: jwt.NewNumericDate(exp)}
	other := good
	other.Audience = jwt.Audience{"member-2"}
	for _, tc := range []struct {
		name, token string
		ok          bool
	}{
		{"empty", "", false},
		{"not a JWT", "opaque-secret-token-value", false},
		{"three dots", "a.b.c.d", false},
		{"unsigned", "eyJhbGciOiJub25lIn0.eyJhdWQiOiJtZW1iZXItMSJ9.", false},
		{"another member's audience", signES256(t, "key-1", other), false},
		{"no kid", signES256(t, "", good), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			member := newFakeMember(t, "", "key-1")
			hub, _ := rawHub(t, func() (string, *time.Time) { return tc.token, &exp })
			ctx, cancel := context.WithTimeout(as(login.FirstLogin), 10*time.Second)
			defer cancel()
			info, err := Login(rawConfig(hub, member))(ctx)
			if (err == nil) != tc.ok {
				t.Fatalf("error %v, want ok %v", err, tc.ok)
			}
			if err != nil && tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Errorf("error %q holds the token", err)
			}
			if !tc.ok && member.seen.Load() != 0 {
				t.Errorf("the member was shown the token %d times", member.seen.Load())
			}
			if tc.ok && info.Token != tc.token {
				t.Errorf("credential %v", info)
			}
		})
	}
}

// A token for the hub's issuer is refused even when the config names the
// issuer as an audience (the hub's API audience by default): only the
// aud == iss check catches it, and it never reaches the member. The
// existing test hits the "not one of" branch first.
func TestReviewATokenForTheHubsIssuerNeverReachesTheMember(t *testing.T) {
	hub := newFakeHub(t)
	cfg := hub.config()
	cfg.Audiences = []string{hubIssuer}
	_, err := Login(cfg)(as(login.FirstLogin))
	var permanent *login.PermanentError
	if err == nil || !errors.As(err, &permanent) || !strings.Contains(err.Error(), "the hub's issuer: the hub would take it") || strings.Contains(err.Error(), "not one of") {
		t.Errorf("error %v, want the issuer audience refused as the hub's issuer", err)
	}
	if n := hub.member.seen.Load(); n != 0 {
		t.Errorf("the member was shown the hub's own token %d times", n)
	}
}

// was: a member's TLS settings that cannot work (a CA that is not PEM, a
// CAPath that is a directory) are found only after a token is minted, on
// every attempt, and the error is not permanent: the login retries them
// for ever, minting each time.
func TestReviewBadMemberTLSIsRefusedBeforeMinting(t *testing.T) {
	for name, edit := range map[string]func(*Member){
		"CAData not PEM":      func(m *Member) { m.CAData = []byte("not a certificate") },
		"CAPath a directory":  func(m *Member) { m.CAData, m.CAPath = nil, t.TempDir() },
		"CAPath with no file": func(m *Member) { m.CAData, m.CAPath = nil, t.TempDir()+"/missing.crt" },
	} {
		t.Run(name, func(t *testing.T) {
			hub := newFakeHub(t)
			cfg := hub.config()
			edit(&cfg.Member)
			_, err := Login(cfg)(as(login.FirstLogin))
			var permanent *login.PermanentError
			if err == nil || !errors.As(err, &permanent) {
				t.Errorf("error %v, want a permanent one", err)
			}
			if n := hub.calls.Load(); n != 0 {
				t.Errorf("the hub minted %d tokens for a member they cannot reach", n)
			}
		})
	}
}

// was: Login keeps the caller's Audiences slice (and hands it to
// handlers.TokenRequest): a caller that reuses its slice changes what is
// minted after the checks ran, past the hub-audience check, and races.
func TestReviewLoginCopiesItsConfig(t *testing.T) {
	hub := newFakeHub(t)
	cfg := hub.config()
	f := Login(cfg)
	if _, err := f(as(login.FirstLogin)); err != nil {
		t.Fatal(err)
	}
	cfg.Audiences[0] = "https://kubernetes.default.svc" // the caller reuses its slice
	_, _ = f(as(login.Refresh))
	if got := hub.asked.Audiences; len(got) != 1 || got[0] != "member-1" {
		t.Errorf("the hub was asked for %q after the caller's slice changed, want member-1 as configured", got)
	}
}

// was: Token's value is a plain unexported string: fmt prints a struct
// field it cannot call methods on (an unexported one) by reflection, value
// and all. The doc promises every fmt verb leaves it out.
func TestReviewATokenInsideAStructPrintsNoSecret(t *testing.T) {
	secret := "eyJhbGciOi.secret-part.sig"
	tok := Token{value: &secret, Audiences: []string{"member-1"}}
	type attempt struct {
		member string
		token  Token
	}
	for _, out := range []string{fmt.Sprintf("%+v", attempt{"m", tok}), fmt.Sprintf("%v", []any{attempt{"m", tok}})} {
		if strings.Contains(out, "secret-part") {
			t.Errorf("printed the token: %s", out)
		}
	}
}

// was: a TokenRequest answer without expirationTimestamp gives a
// credential with no Expiration, which the vault serves until a 401
// instead of refreshing before the JWT's exp.
func TestReviewTheCredentialExpiresWithTheJWT(t *testing.T) {
	exp := time.Now().Add(20 * time.Minute).Truncate(time.Second)
	member := newFakeMember(t, "key-1")
	tok := signES256(t, "key-1", jwt.Claims{Issuer: hubIssuer, Audience: jwt.Audience{"member-1"}, Expiry: jwt.NewNumericDate(exp)})
	hub, _ := rawHub(t, func() (string, *time.Time) { return tok, nil })
	info, err := Login(rawConfig(hub, member))(as(login.FirstLogin))
	if err != nil {
		t.Fatal(err)
	}
	if info.Expiration.IsZero() || info.Expiration.After(exp) {
		t.Errorf("the credential expires at %v, want no later than the JWT's %v", info.Expiration, exp)
	}
}

// was: Generic is exported and callable with any Member: it does not
// check it, so a Provider that wraps it (a user's, a cloud module's) can
// send the token over plain http.
func TestReviewGenericChecksItsMember(t *testing.T) {
	var got atomic.Value
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
	}))
	defer plain.Close()
	secret := "secret-token"
	tok := Token{value: &secret, Audiences: []string{"member-1"}}
	_, err := Generic.Credential(context.Background(), tok, Member{Server: plain.URL})
	if err == nil {
		t.Error("Generic gave a credential for a plain http member")
	}
	if v, _ := got.Load().(string); strings.Contains(v, "secret-token") {
		t.Errorf("Generic sent the token over plain http: %q", v)
	}
}

// A member's non-401 failure is retried (not permanent) and names no token.
func TestReviewAMemberOutageIsRetried(t *testing.T) {
	hub := newFakeHub(t)
	hub.member.status = http.StatusServiceUnavailable
	_, err := Login(hub.config())(as(login.FirstLogin))
	var permanent *login.PermanentError
	if err == nil || errors.As(err, &permanent) || errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "503") {
		t.Errorf("error %v, want a retryable one naming 503", err)
	}
	if strings.Contains(err.Error(), hub.minted[0]) {
		t.Errorf("error %q holds the token", err)
	}
}

// Concurrent logins of one handler are safe (run with -race), and each
// gives the token it minted.
func TestReviewConcurrentLogins(t *testing.T) {
	hub := newFakeHub(t)
	f := Login(hub.config())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := f(as(login.Refresh)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// The documented default lifetime (an hour) and the bounds' ends are what
// the hub is asked for: no existing test would fail if the default went.
func TestReviewLifetimeDefaultAndBounds(t *testing.T) {
	for lifetime, want := range map[time.Duration]int64{0: 3600, 10 * time.Minute: 600, 24 * time.Hour: 86400} {
		hub := newFakeHub(t)
		cfg := hub.config()
		cfg.Lifetime = lifetime
		if _, err := Login(cfg)(as(login.FirstLogin)); err != nil {
			t.Fatalf("%v: %v", lifetime, err)
		}
		if got := hub.asked.ExpirationSeconds; got == nil || *got != want {
			t.Errorf("Lifetime %v: the hub was asked for %v s, want %d", lifetime, got, want)
		}
	}
}

// The checks against a server of a config with nothing of its own (client-go
// then hands out http.DefaultClient) leave http.DefaultClient as it was:
// a cold run's race detector caught the redirect policy written there.
func TestShowLeavesTheDefaultClientAlone(t *testing.T) {
	hub := newFakeHub(t)
	if _, err := Login(hub.config())(as(login.FirstLogin)); err != nil {
		t.Fatal(err)
	}
	if http.DefaultClient.CheckRedirect != nil {
		t.Error("http.DefaultClient's CheckRedirect was set")
	}
}
