package addonauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/authvault/authvault/testkit/testwait"
)

const audience = "dashboard.kube-system.svc"

// recorder is an upstream that records what reached it.
type recorder struct {
	mu   sync.Mutex
	seen []http.Header
	user []User
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, _ := UserFrom(r.Context())
	rec.mu.Lock()
	rec.seen = append(rec.seen, r.Header.Clone())
	rec.user = append(rec.user, u)
	rec.mu.Unlock()
	fmt.Fprintf(w, "hello %s", r.Header.Get("X-Authenticated-User"))
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.seen)
}

// setup is an Authenticator in front of a recorder, its logs in logs.
type setup struct {
	api  *fakeAPI
	auth *Authenticator
	up   *recorder
	srv  *httptest.Server
	logs *bytes.Buffer
}

func newSetup(t testing.TB, opts Options) *setup {
	t.Helper()
	s := &setup{api: newFakeAPI(t), up: &recorder{}, logs: &bytes.Buffer{}}
	var mu sync.Mutex
	opts.Audience = audience
	opts.Config = s.api.config()
	opts.Logger = funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		s.logs.WriteString(prefix + args + "\n")
	}, funcr.Options{Verbosity: 1})
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.auth = a
	s.srv = httptest.NewServer(a.Middleware(s.up))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *setup) get(t testing.TB, token string, extra http.Header) (*http.Response, string) {
	t.Helper()
	return s.getPathWith(t, token, "/hello", extra)
}

// getPath GETs path with token.
func (s *setup) getPath(t *testing.T, token, path string) (*http.Response, string) {
	t.Helper()
	return s.getPathWith(t, token, path, nil)
}

func (s *setup) getPathWith(t testing.TB, token, path string, extra http.Header) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
	for k, v := range extra {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func TestValidTokenReachesTheUpstreamAsItsUser(t *testing.T) {
	s := newSetup(t, Options{})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	resp, body := s.get(t, tok, nil)
	if resp.StatusCode != 200 || body != "hello system:serviceaccount:team-a:client" {
		t.Fatalf("GET = %d %q, want 200 greeting the service account; log:\n%s", resp.StatusCode, body, s.logs)
	}
	h := s.up.seen[0]
	if h.Get("Authorization") != "" {
		t.Error("the token reached the upstream")
	}
	if got := h.Values("X-Authenticated-Groups"); len(got) != 3 || got[1] != "system:serviceaccounts:team-a" {
		t.Errorf("groups = %v", got)
	}
	if h.Get("X-Authenticated-UID") != "uid-client" || s.up.user[0].Name != "system:serviceaccount:team-a:client" {
		t.Errorf("UID header %q, UserFrom %+v", h.Get("X-Authenticated-UID"), s.up.user[0])
	}
	if s.api.reviews.Load() != 1 {
		t.Errorf("%d TokenReviews, want 1", s.api.reviews.Load())
	}
}

// Tokens the local check refuses never cost a TokenReview.
func TestBadTokensAreRefusedWithoutAReview(t *testing.T) {
	s := newSetup(t, Options{})
	otherKey := newFakeAPI(t) // same issuer name, keys the cluster does not have
	cases := map[string]string{
		"garbage":         "not-a-jwt",
		"empty parts":     "..",
		"another service": s.api.token(t, "team-a", "client", "other.svc", time.Hour),
		"expired":         s.api.token(t, "team-a", "client", audience, -time.Minute),
		"another issuer":  otherKey.sign(t, otherKey.keys[0], s.api.kids[0], "https://evil.example", "team-a", "client", audience, time.Hour),
		"forged key":      otherKey.sign(t, otherKey.keys[0], s.api.kids[0], s.api.issuer, "team-a", "client", audience, time.Hour),
		"huge":            strings.Repeat("a", 1<<20),
	}
	for name, tok := range cases {
		resp, body := s.get(t, tok, nil)
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: %d %q, want 401 with WWW-Authenticate", name, resp.StatusCode, body)
		}
		if strings.Contains(body+resp.Header.Get("WWW-Authenticate"), tok[:min(len(tok), 40)]) && len(tok) > 20 {
			t.Errorf("%s: the response repeats the token", name)
		}
	}
	if n := s.api.reviews.Load(); n != 0 {
		t.Errorf("%d TokenReviews for tokens the local check refuses, want 0", n)
	}
	if s.up.count() != 0 {
		t.Errorf("%d refused requests reached the upstream", s.up.count())
	}
	for name, tok := range cases {
		if len(tok) > 20 && strings.Contains(s.logs.String(), tok[len(tok)-20:]) {
			t.Errorf("%s: the log holds the token", name)
		}
	}
}

func TestMissingOrAmbiguousAuthorization(t *testing.T) {
	s := newSetup(t, Options{})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	for name, h := range map[string]http.Header{
		"none":        {},
		"basic":       {"Authorization": {"Basic dXNlcjpwYXNz"}},
		"two":         {"Authorization": {"Bearer " + tok, "Bearer " + tok}},
		"empty token": {"Authorization": {"Bearer "}},
	} {
		if resp, _ := s.get(t, "", h); resp.StatusCode != 401 {
			t.Errorf("%s: %d, want 401", name, resp.StatusCode)
		}
	}
	if s.up.count() != 0 {
		t.Error("a request without one bearer token reached the upstream")
	}
}

// A caller cannot claim an identity: every incoming identity header is
// removed, whatever its spelling.
func TestSpoofedIdentityHeadersNeverReachTheUpstream(t *testing.T) {
	s := newSetup(t, Options{})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	spoof := http.Header{
		"X-Authenticated-User":   {"admin"},
		"x-authenticated-groups": {"system:masters"},
		"X-AUTHENTICATED-UID":    {"0"},
		"X-Remote-User":          {"admin"},
		"X-Remote-Group":         {"system:masters"},
		"X-Remote-Extra-Scopes":  {"all"},
	}
	resp, _ := s.get(t, tok, spoof)
	if resp.StatusCode != 200 {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	h := s.up.seen[0]
	for name, values := range h {
		for _, v := range values {
			if v == "admin" || v == "system:masters" || v == "0" || v == "all" {
				t.Errorf("spoofed %s: %s reached the upstream", name, v)
			}
		}
	}
	if h.Get("X-Authenticated-User") != "system:serviceaccount:team-a:client" {
		t.Errorf("user header = %q", h.Get("X-Authenticated-User"))
	}
}

// Many requests with one token cost one review per SuccessTTL.
func TestOneReviewPerTokenAndTTL(t *testing.T) {
	s := newSetup(t, Options{SuccessTTL: time.Hour})
	s.api.reviewDelay = 50 * time.Millisecond // all requests arrive while the first review runs
	tok := s.api.token(t, "team-a", "client", audience, 2*time.Hour)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
				t.Errorf("GET = %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if n := s.api.reviews.Load(); n != 1 {
		t.Errorf("%d TokenReviews for 50 requests with one token, want 1", n)
	}
}

// A revoked token is refused once its success has aged out; a refusal is
// cached for FailureTTL.
func TestRevocationBitesWithinTheSuccessTTL(t *testing.T) {
	s := newSetup(t, Options{SuccessTTL: 50 * time.Millisecond, FailureTTL: time.Hour})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	s.api.revoke(tok)
	time.Sleep(60 * time.Millisecond)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 401 {
		t.Fatalf("GET after revocation = %d, want 401", resp.StatusCode)
	}
	before := s.api.reviews.Load()
	for range 5 {
		s.get(t, tok, nil)
	}
	if s.api.reviews.Load() != before {
		t.Errorf("a refused token was reviewed again within FailureTTL")
	}
}

// While the API server is down, a token reviewed recently is still served;
// a new one gets 503; both recover when the server does.
func TestStaleIfError(t *testing.T) {
	s := newSetup(t, Options{SuccessTTL: 20 * time.Millisecond, StaleIfError: time.Hour})
	known := s.api.token(t, "team-a", "known", audience, time.Hour)
	fresh := s.api.token(t, "team-a", "fresh", audience, time.Hour)
	if resp, _ := s.get(t, known, nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	s.api.setDown(true)
	time.Sleep(30 * time.Millisecond)
	if resp, _ := s.get(t, known, nil); resp.StatusCode != 200 {
		t.Errorf("known token while the API server is down = %d, want 200 (stale)", resp.StatusCode)
	}
	resp, _ := s.get(t, fresh, nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("new token while the API server is down = %d, want 503 with Retry-After", resp.StatusCode)
	}
	s.api.setDown(false)
	// The failure is remembered for a moment (see circuit): the new token
	// is served once a probe finds the API server back.
	deadline := time.Now().Add(20 * time.Second)
	for resp, _ := s.get(t, fresh, nil); resp.StatusCode != 200; resp, _ = s.get(t, fresh, nil) {
		if resp.StatusCode != 503 || time.Now().After(deadline) {
			t.Fatalf("new token after the outage = %d, want 503 then 200", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Without StaleIfError an outage refuses every token it cannot review.
func TestNoStaleIfError(t *testing.T) {
	s := newSetup(t, Options{SuccessTTL: 10 * time.Millisecond, StaleIfError: -1})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	s.get(t, tok, nil)
	s.api.setDown(true)
	time.Sleep(20 * time.Millisecond)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 503 {
		t.Errorf("GET while down = %d, want 503", resp.StatusCode)
	}
}

// A token signed with a key the cluster rotated in is accepted after one
// refetch; tokens with unknown key ids refetch at most once per interval.
func TestUnknownKeyRefetchesAtMostOncePerInterval(t *testing.T) {
	s := newSetup(t, Options{KeyRefetchInterval: time.Hour})
	old := s.api.token(t, "team-a", "client", audience, time.Hour)
	s.get(t, old, nil)
	fetches := s.api.keyFetches.Load()
	other := newFakeAPI(t)
	for i := range 20 {
		s.get(t, other.sign(t, other.keys[0], fmt.Sprintf("random-%d", i), s.api.issuer, "a", "b", audience, time.Hour), nil)
	}
	if n := s.api.keyFetches.Load() - fetches; n > 1 {
		t.Errorf("%d key fetches for 20 unknown key ids within the interval, want at most 1", n)
	}

	s2 := newSetup(t, Options{KeyRefetchInterval: time.Millisecond})
	first := s2.api.token(t, "team-a", "client", audience, time.Hour)
	s2.get(t, first, nil)
	s2.api.rotateKey(t)
	time.Sleep(2 * time.Millisecond)
	rotated := s2.api.token(t, "team-a", "client", audience, time.Hour)
	if resp, _ := s2.get(t, rotated, nil); resp.StatusCode != 200 {
		t.Errorf("token with the rotated-in key = %d, want 200", resp.StatusCode)
	}
}

// The key set survives an outage: with reviews off, known tokens are
// verified while the API server is down.
func TestKeysSurviveAnOutage(t *testing.T) {
	s := newSetup(t, Options{NoReview: true})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	s.get(t, tok, nil)
	s.api.setDown(true)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
		t.Errorf("GET while down with local verification = %d, want 200", resp.StatusCode)
	}
	if s.api.reviews.Load() != 0 {
		t.Error("NoReview sent a TokenReview")
	}
}

func TestRateLimitPerUser(t *testing.T) {
	s := newSetup(t, Options{RatePerUser: 1, BurstPerUser: 2})
	a := s.api.token(t, "team-a", "a", audience, time.Hour)
	b := s.api.token(t, "team-a", "b", audience, time.Hour)
	codes := []int{}
	for range 3 {
		resp, _ := s.get(t, a, nil)
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Errorf("codes for a = %v, want 200 200 429", codes)
	}
	if resp, _ := s.get(t, b, nil); resp.StatusCode != 200 {
		t.Errorf("another user = %d, want 200: buckets are per user", resp.StatusCode)
	}
}

// A request that lasts ends when its token expires, and when a review
// finds it revoked.
func TestStreamsEndWithTheirToken(t *testing.T) {
	streaming := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	const ttl = time.Second
	for _, tc := range []struct {
		name   string
		life   time.Duration
		revoke bool
	}{{"expiry", 1500 * time.Millisecond, false}, {"revocation", time.Hour, true}} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t)
			// A SuccessTTL of a second, not a tenth: the bound below is the
			// TTL's, and the scheduler of a busy machine must not decide it.
			a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: ttl, Leeway: -1})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(a.Middleware(http.HandlerFunc(streaming)))
			defer srv.Close()
			tok := api.token(t, "team-a", "watcher", audience, tc.life)
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/watch", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("watch = %v %v", resp, err)
			}
			if tc.revoke {
				time.Sleep(50 * time.Millisecond)
				api.revoke(tok)
			}
			done := make(chan struct{})
			go func() { _, _ = io.Copy(io.Discard, resp.Body); close(done) }()
			select {
			case <-done:
			case <-time.After(testwait.Hang): // with its token an hour long, only the revocation ends it
				t.Fatalf("the stream outlived its token by %v", testwait.Hang)
			}
			resp.Body.Close()
			// The revocation bites within the SuccessTTL; three more
			// seconds for a busy machine, far less than a stream kept to
			// its token's end or to MaxRequestDuration would take.
			if took := time.Since(start); tc.revoke && took > ttl+3*time.Second {
				t.Errorf("the stream ended %v after its start, want within the SuccessTTL (%v) of the revocation", took, ttl)
			}
		})
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	if _, err := New(Options{Config: newFakeAPI(t).config()}); err == nil || !strings.Contains(err.Error(), "Audience") {
		t.Errorf("New without Audience = %v", err)
	}
	if _, err := New(Options{Audience: audience}); err == nil || !strings.Contains(err.Error(), "Config") {
		t.Errorf("New without Config = %v", err)
	}
	if _, err := New(Options{Audience: audience, Config: newFakeAPI(t).config(), Headers: Headers{User: "X-U"}}); err == nil {
		t.Error("New with one header name accepted it")
	}
}

// Errors name the reason, never the token.
func TestAuthenticateErrorsHoldNoToken(t *testing.T) {
	s := newSetup(t, Options{})
	tok := s.api.token(t, "team-a", "client", "other.svc", time.Hour)
	_, err := s.auth.Authenticate(context.Background(), tok)
	if !errors.Is(err, errAudience) {
		t.Fatalf("Authenticate = %v, want the audience error", err)
	}
	if strings.Contains(fmt.Sprintf("%+v", err), tok[len(tok)-20:]) {
		t.Error("the error holds the token")
	}
}

// ReviewForeign sends tokens that are not the cluster issuer's JWTs (a
// webhook's opaque tokens) to TokenReview; without it they are refused
// without one.
func TestReviewForeign(t *testing.T) {
	for _, foreign := range []bool{false, true} {
		s := newSetup(t, Options{ReviewForeign: foreign})
		s.api.accepted["opaque-webhook-token"] = authnv1.UserInfo{Username: "alice", Groups: []string{"devs"}}
		resp, body := s.get(t, "opaque-webhook-token", nil)
		switch {
		case foreign && (resp.StatusCode != 200 || body != "hello alice"):
			t.Errorf("ReviewForeign: %d %q, want 200 for alice", resp.StatusCode, body)
		case !foreign && (resp.StatusCode != 401 || s.api.reviews.Load() != 0):
			t.Errorf("without ReviewForeign: %d after %d reviews, want 401 after none", resp.StatusCode, s.api.reviews.Load())
		}
	}
}
