package federation

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/login"
)

const hubIssuer = "https://hub.example:6443"

// fakeHub answers TokenRequest as an API server does: a JWT signed with
// its current key, for the audiences asked (or its issuer), or the status
// its refuse field names.
type fakeHub struct {
	t      *testing.T
	srv    *httptest.Server
	calls  atomic.Int32
	mu     sync.Mutex
	kid    string
	key    *ecdsa.PrivateKey
	status int // answer this instead, when not 0
	asked  authenticationv1.TokenRequestSpec
	// audience, when not nil, is what every token says, whatever was asked.
	audience []string
	member   *fakeMember // trusts key-1
	takesOwn bool        // the hub's API server takes the member's audience
	versions int         // GETs of /version
	minted   []string
}

// sign is a JWT of claims signed with key, its header naming kid (none
// for "").
func sign(key *ecdsa.PrivateKey, kid string, claims jwt.Claims) (string, error) {
	opts := &jose.SignerOptions{}
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, opts)
	if err != nil {
		return "", err
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

func newFakeHub(t *testing.T) *fakeHub {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHub{t: t, kid: "key-1", key: key, member: newFakeMember(t, "key-1")}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *fakeHub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.URL.Path == "/version" { // the check that the hub refuses the member's token
		h.versions++
		if !h.takesOwn {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		}
		return
	}
	h.calls.Add(1)
	if h.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(h.status)
		reason := map[int]string{http.StatusForbidden: "Forbidden", http.StatusNotFound: "NotFound"}[h.status]
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"refused","reason":%q,"code":%d}`, reason, h.status)
		return
	}
	var req authenticationv1.TokenRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.asked = req.Spec
	aud := req.Spec.Audiences
	if len(aud) == 0 {
		aud = []string{hubIssuer}
	}
	if h.audience != nil {
		aud = h.audience
	}
	exp := time.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second)
	tok, err := sign(h.key, h.kid, jwt.Claims{Issuer: hubIssuer, Subject: "system:serviceaccount:fleet:op", Audience: aud, Expiry: jwt.NewNumericDate(exp)})
	if err != nil {
		h.t.Error(err)
		return
	}
	h.minted = append(h.minted, tok)
	req.Status = authenticationv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(exp)}
	req.Kind, req.APIVersion = "TokenRequest", "authentication.k8s.io/v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(&req)
}

// fakeMember answers GET /version as an API server that trusts the hub's
// tokens of the keys in trusted for audience member-1 would: 200, or 401.
type fakeMember struct {
	srv     *httptest.Server
	mu      sync.Mutex
	trusted map[string]bool
	status  int // answer this to a trusted token, when not 0
	seen    atomic.Int32
}

func newFakeMember(t *testing.T, trusted ...string) *fakeMember {
	m := &fakeMember{trusted: map[string]bool{}}
	for _, k := range trusted {
		m.trusted[k] = true
	}
	m.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.seen.Add(1)
		m.mu.Lock()
		defer m.mu.Unlock()
		tok, err := jwt.ParseSigned(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), signingAlgorithms)
		var claims jwt.Claims
		if err != nil || tok.UnsafeClaimsWithoutVerification(&claims) != nil || !m.trusted[tok.Headers[0].KeyID] || !slices.Contains(claims.Audience, "member-1") || r.URL.Path != "/version" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if m.status != 0 {
			w.WriteHeader(m.status)
			return
		}
		fmt.Fprint(w, `{"gitVersion":"v1.36.3"}`)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *fakeMember) trust(keys ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		m.trusted[k] = true
	}
}

func (m *fakeMember) member() Member {
	return Member{Server: m.srv.URL, CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.srv.Certificate().Raw})}
}

func (h *fakeHub) config() Config {
	return Config{
		Hub:       &rest.Config{Host: h.srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}},
		Namespace: "fleet", ServiceAccount: "op",
		Audiences: []string{"member-1"},
		Member:    h.member.member(),
	}
}

func as(kind login.ReasonKind) context.Context {
	return login.WithReason(context.Background(), login.Reason{Kind: kind})
}

func TestLoginMintsForTheMembersAudienceAndGivesItToTheMember(t *testing.T) {
	hub := newFakeHub(t)
	cfg := hub.config()
	cfg.Lifetime = 20 * time.Minute
	info, err := Login(cfg)(as(login.FirstLogin))
	if err != nil {
		t.Fatal(err)
	}
	if got := hub.asked; len(got.Audiences) != 1 || got.Audiences[0] != "member-1" || *got.ExpirationSeconds != 1200 {
		t.Errorf("the hub was asked %+v, want audience member-1 and 1200 s", got)
	}
	if info.Server != cfg.Member.Server || string(info.CAData) != string(cfg.Member.CAData) || info.Token != hub.minted[0] {
		t.Errorf("credential %v, want the minted token for the member's server and CA", info)
	}
	if d := time.Until(info.Expiration); d < 19*time.Minute || d > 21*time.Minute {
		t.Errorf("the credential expires in %v, want the token's 20 min", d)
	}
	if info.ProxyURL != "" || info.Insecure {
		t.Errorf("credential %v goes through a proxy or skips verification", info)
	}
}

// A config that would mint a token the hub itself takes, or send it
// anywhere but over verified TLS to an address alone, is refused before
// the hub is asked.
func TestLoginRefusesAConfigThatWouldLeakTheToken(t *testing.T) {
	hub := newFakeHub(t)
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no audience", func(c *Config) { c.Audiences = nil }, "Audiences are required"},
		{"an empty audience", func(c *Config) { c.Audiences = []string{""} }, "holds an empty audience"},
		{"the hub's audience", func(c *Config) { c.Audiences = []string{"https://kubernetes.default.svc"} }, "is the hub's own"},
		{"no hub", func(c *Config) { c.Hub = nil }, "Config.Hub is required"},
		{"no ServiceAccount", func(c *Config) { c.ServiceAccount = "" }, "ServiceAccount are required"},
		{"a short life", func(c *Config) { c.Lifetime = time.Minute }, "out of [10m0s, 24h0m0s]"},
		{"a long life", func(c *Config) { c.Lifetime = 48 * time.Hour }, "out of [10m0s, 24h0m0s]"},
		{"plain http", func(c *Config) { c.Member.Server = "http://member-1.example" }, "not an https URL"},
		{"user info", func(c *Config) { c.Member.Server = "https://u:hunter2@member-1.example" }, "holds user info"},
		{"no server", func(c *Config) { c.Member.Server = "" }, "Member.Server is empty"},
	} {
		cfg := hub.config()
		tc.edit(&cfg)
		_, err := Login(cfg)(as(login.FirstLogin))
		var permanent *login.PermanentError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &permanent) {
			t.Errorf("%s: error %v, want a permanent one saying %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error %q holds the password", tc.name, err)
		}
	}
	if n := hub.calls.Load(); n != 0 {
		t.Errorf("the hub was asked %d times for refused configs", n)
	}
}

func TestLoginSaysWhichServiceAccountAndPermissionTheHubRefused(t *testing.T) {
	hub := newFakeHub(t)
	for status, want := range map[int]string{
		http.StatusForbidden: "serviceaccount fleet/op: this identity may not create serviceaccounts/token in namespace fleet",
		http.StatusNotFound:  "serviceaccount fleet/op: the ServiceAccount does not exist",
	} {
		hub.mu.Lock()
		hub.status = status
		hub.mu.Unlock()
		_, err := Login(hub.config())(as(login.FirstLogin))
		var permanent *login.PermanentError
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &permanent) {
			t.Errorf("%d: error %v, want one for this login saying %q", status, err, want)
		}
	}
}

// A hub that mints a token for its own issuer, whatever was asked (a
// webhook, a bug), gives no credential: a member could replay it.
func TestLoginRefusesATokenTheHubWouldTake(t *testing.T) {
	hub := newFakeHub(t)
	hub.audience = []string{"member-1", hubIssuer}
	_, err := Login(hub.config())(as(login.FirstLogin))
	var permanent *login.PermanentError
	if err == nil || !strings.Contains(err.Error(), `audience "https://hub.example:6443", the hub's issuer`) || !errors.As(err, &permanent) {
		t.Errorf("error %v, want the token's hub audience refused", err)
	}
	hub.audience = []string{"member-1", "member-2"}
	if _, err := Login(hub.config())(as(login.FirstLogin)); err == nil || !strings.Contains(err.Error(), `audience "member-2", not one of ["member-1"]`) {
		t.Errorf("error %v, want an audience not asked for refused", err)
	}
	hub.audience = []string{}
	if _, err := Login(hub.config())(as(login.FirstLogin)); err == nil || !strings.Contains(err.Error(), "has no audience") {
		t.Errorf("error %v, want a token without an audience refused", err)
	}
}

// After the hub switches its signing key, a member that has not fetched
// the new one rejects its tokens: the login gives no such token (the vault
// serves the one in hand) and says why, and gives one once the member
// trusts the key.
func TestLoginSaysTheMemberDoesNotTrustTheHubsNewKeyYet(t *testing.T) {
	hub := newFakeHub(t)
	f := Login(hub.config())
	if _, err := f(as(login.FirstLogin)); err != nil {
		t.Fatal(err)
	}
	hub.mu.Lock()
	hub.kid = "key-2" // the hub switches keys
	hub.mu.Unlock()
	_, err := f(as(login.Refresh))
	var permanent *login.PermanentError
	if err == nil || !errors.As(err, &permanent) || !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), `key "key-2" where tokens of its key "key-1" served: the member does not trust the hub's new key yet`) {
		t.Fatalf("error %v, want the new key named, for this login", err)
	}
	hub.member.trust("key-2") // reloaded
	if info, err := f(as(login.Refresh)); err != nil || info.Token != hub.minted[2] {
		t.Errorf("once the member trusts the key: %v, %v", info, err)
	}
}

// A member that rejects the first token (an audience or issuer it does
// not trust, the hub's keys out of its reach) is named with the audience,
// and the token is not given.
func TestLoginNamesTheAudienceOfAMemberThatRejectsEveryToken(t *testing.T) {
	hub := newFakeHub(t)
	hub.member = newFakeMember(t) // trusts nothing
	_, err := Login(hub.config())(as(login.FirstLogin))
	var permanent *login.PermanentError
	if err == nil || !errors.As(err, &permanent) || !strings.Contains(err.Error(), "rejected the hub's token for audience member-1 (serviceaccount fleet/op)") {
		t.Fatalf("error %v, want the audience named", err)
	}
	if strings.Contains(err.Error(), hub.minted[0]) {
		t.Errorf("error %q holds the token", err)
	}
}

// The member's answers that come after authentication (403, 404) are a
// token it took; one that is neither that nor 401 (a redirect, a 5xx) is
// an error, and a redirect is not followed with the token.
func TestGenericTakesAnAuthenticatedAnswerAndFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	for _, tc := range []struct {
		status int
		ok     bool
	}{{http.StatusForbidden, true}, {http.StatusNotFound, true}, {http.StatusFound, false}, {http.StatusServiceUnavailable, false}} {
		hub := newFakeHub(t)
		hub.member.status = tc.status
		if tc.status == http.StatusFound {
			hub.member.srv.Config.Handler = http.RedirectHandler(other.URL+"/version", http.StatusFound)
		}
		_, err := Login(hub.config())(as(login.FirstLogin))
		if (err == nil) != tc.ok {
			t.Errorf("%d: error %v, want ok %v", tc.status, err, tc.ok)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("a redirect was followed %d times", n)
	}
}

// The token's value is in no printed form of Token and no error.
func TestTokenPrintsNoSecret(t *testing.T) {
	secret := "eyJhbGciOi.secret-part.sig"
	tok := Token{value: &secret, Audiences: []string{"member-1"}, KeyID: "key-1", Expiration: time.Unix(1e9, 0)}
	js, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s %q %x", tok, tok, tok, tok, tok, tok), fmt.Sprint(&tok), string(js), fmt.Sprint(tok.MarshalLog())} {
		if strings.Contains(out, "secret-part") {
			t.Errorf("printed the token: %s", out)
		}
		if !strings.Contains(out, "member-1") {
			t.Errorf("printed no audience: %s", out)
		}
	}
}

// A hub whose API server accepts the member's audience (--api-audiences
// beyond its issuer) takes the member's token: none is given, and the hub
// is asked once per handler, not at every login.
func TestLoginRefusesAnAudienceTheHubTakes(t *testing.T) {
	hub := newFakeHub(t)
	hub.takesOwn = true
	_, err := Login(hub.config())(as(login.FirstLogin))
	var permanent *login.PermanentError
	if err == nil || !errors.As(err, &permanent) || !strings.Contains(err.Error(), "the hub takes a token for audience member-1") {
		t.Errorf("error %v, want the hub's own audience refused", err)
	}
	if n := hub.member.seen.Load(); n != 0 {
		t.Errorf("the member was shown the token %d times", n)
	}
	hub.takesOwn = false
	f := Login(hub.config())
	for range 3 {
		if _, err := f(as(login.Refresh)); err != nil {
			t.Fatal(err)
		}
	}
	if hub.versions != 2 {
		t.Errorf("the hub was asked %d times in all, want once per handler", hub.versions)
	}
}

// A refusal by a cloud's token service (a Provider other than Generic)
// names the exchange and what the cloud must trust, not the member's
// authentication config; Generic's names the member.
func TestLoginNamesWhoRefused(t *testing.T) {
	for _, c := range []struct {
		name     string
		provider Provider
		want     []string
		not      string
	}{
		{"generic", Generic, []string{"member https://", "the member must trust the hub's issuer"}, "cloud"},
		{"a cloud", ProviderFunc(func(context.Context, Token, Member) (*login.ConnectionInfo, error) {
			return nil, fmt.Errorf("sts: %w", ErrRejected)
		}), []string{"the exchange for member https://", "(the cloud's token service) rejected the hub's token for audience member-1", "the cloud must trust the hub's issuer"}, "the member must trust"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hub := newFakeHub(t)
			hub.member = newFakeMember(t) // trusts nothing
			cfg := hub.config()
			cfg.Provider = c.provider
			_, err := Login(cfg)(as(login.FirstLogin))
			if err == nil {
				t.Fatal("the login took a rejected token")
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), c.not) {
				t.Errorf("error %q says %q", err, c.not)
			}
		})
	}
}
