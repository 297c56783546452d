package addonauth

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/authvault/authvault/testkit/testwait"
)

const newIssuer = "https://issuer-b.example"

// The API server restarted with --service-account-issuer=B
// --service-account-issuer=A, the documented way to change the issuer:
// B signs new tokens, discovery names B only, and the API server accepts
// both. A running Authenticator serves both without a restart: a token of
// the cluster's key that names an issuer the key set does not know
// refreshes discovery.
func TestChangedIssuerIsPickedUpWithoutARestart(t *testing.T) {
	for _, noReview := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoReview=%v", noReview), func(t *testing.T) {
			clk := newManualClock()
			s := newSetup(t, Options{NoReview: noReview, KeyRefetchInterval: 10 * time.Second, now: clk.now})
			old := s.api.token(t, "team-a", "old", audience, time.Hour)
			if resp, _ := s.get(t, old, nil); resp.StatusCode != 200 {
				t.Fatalf("token of the first issuer = %d, want 200", resp.StatusCode)
			}
			s.api.setIssuer(newIssuer)
			clk.advance(11 * time.Second)
			fetches := s.api.discoveries.Load()
			fresh := s.api.token(t, "team-a", "new", audience, time.Hour)
			if resp, _ := s.get(t, fresh, nil); resp.StatusCode != 200 {
				t.Errorf("token of the new issuer = %d, want 200", resp.StatusCode)
			}
			if resp, _ := s.get(t, old, nil); resp.StatusCode != 200 {
				t.Errorf("token of the old issuer after the change = %d, want 200", resp.StatusCode)
			}
			if got, want := s.api.discoveries.Load()-fetches, int64(1); got != want {
				t.Errorf("%d discovery fetches for the new issuer, want %d", got, want)
			}
			// The new issuer is now known: its tokens are verified
			// locally, not reviewed for their issuer's sake.
			if noReview && s.api.reviews.Load() != 0 {
				t.Errorf("NoReview sent %d TokenReviews", s.api.reviews.Load())
			}
		})
	}
}

// An Authenticator started after the change knows only the new issuer (the
// discovery document names the first one): a token of the cluster's key
// that names the old one is reviewed, and TokenReview decides. With
// NoReview nothing can vouch for the issuer: refused.
func TestIssuerDiscoveryDoesNotNameIsReviewed(t *testing.T) {
	for _, tc := range []struct {
		noReview    bool
		accepted    bool // by the API server
		wantStatus  int
		wantReviews int64
	}{
		{false, true, 200, 1},
		{false, false, 401, 1},
		{true, true, 401, 0},
	} {
		t.Run(fmt.Sprintf("NoReview=%v,accepted=%v", tc.noReview, tc.accepted), func(t *testing.T) {
			// The old token was issued well before the first fetch, as
			// for a proxy started after the change.
			clk := newManualClock()
			clk.advance(defaultLeeway + 2*time.Second)
			s := newSetup(t, Options{NoReview: tc.noReview, now: clk.now})
			oldIssuer := s.api.issuer
			old := s.api.tokenOf(t, oldIssuer, "team-a", "old", audience, time.Hour)
			if !tc.accepted {
				s.api.revoke(old) // as when the old issuer is no longer among the flags
			}
			s.api.setIssuer(newIssuer)
			if resp, _ := s.get(t, s.api.token(t, "team-a", "new", audience, time.Hour), nil); resp.StatusCode != 200 {
				t.Fatalf("token of the discovery's issuer = %d, want 200", resp.StatusCode)
			}
			reviews := s.api.reviews.Load()
			resp, _ := s.get(t, old, nil)
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("token of the old issuer = %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if got := s.api.reviews.Load() - reviews; got != tc.wantReviews {
				t.Errorf("%d TokenReviews for it, want %d", got, tc.wantReviews)
			}
			if tc.noReview {
				if _, err := s.auth.Authenticate(context.Background(), old); !errors.Is(err, errUnknownIssuer) {
					t.Errorf("Authenticate = %v, want %v", err, errUnknownIssuer)
				}
			}
		})
	}
}

// A token of the cluster's key naming an issuer the API server never had
// is reviewed and refused; however many such tokens come, discovery is
// fetched at most once per KeyRefetchInterval.
func TestUnknownIssuersRefetchAtMostOncePerInterval(t *testing.T) {
	s := newSetup(t, Options{KeyRefetchInterval: time.Hour})
	if resp, _ := s.get(t, s.api.token(t, "team-a", "client", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	fetches, reviews := s.api.discoveries.Load(), s.api.reviews.Load()
	for i := range 20 {
		tok := s.api.sign(t, s.api.keys[0], s.api.kids[0], fmt.Sprintf("https://other-%d.example", i), "team-a", "client", audience, time.Hour)
		if resp, _ := s.get(t, tok, nil); resp.StatusCode != 401 {
			t.Errorf("issuer %d: %d, want 401", i, resp.StatusCode)
		}
	}
	if got := s.api.discoveries.Load() - fetches; got > 1 {
		t.Errorf("%d discovery fetches for 20 unknown issuers within the interval, want at most 1", got)
	}
	if got, want := s.api.reviews.Load()-reviews, int64(20); got != want {
		t.Errorf("%d TokenReviews, want %d: the cluster's key signed them, the API server decides", got, want)
	}
}

// Forged tokens stay local however the issuer changed: a token that claims
// an issuer (the old one, the new one) but is not signed by a key of the
// cluster never costs a TokenReview, whether the Authenticator knew that
// issuer (it ran through the change) or not (it started after).
func TestForgedTokensOfAnyIssuerAreRefusedLocally(t *testing.T) {
	for _, started := range []string{"before the change", "after the change"} {
		t.Run(started, func(t *testing.T) {
			s := newSetup(t, Options{KeyRefetchInterval: time.Millisecond})
			oldIssuer := s.api.issuer
			if started == "before the change" {
				if resp, _ := s.get(t, s.api.token(t, "team-a", "client", audience, time.Hour), nil); resp.StatusCode != 200 {
					t.Fatal("first GET refused")
				}
			}
			s.api.setIssuer(newIssuer)
			if resp, _ := s.get(t, s.api.token(t, "team-a", "client", audience, time.Hour), nil); resp.StatusCode != 200 {
				t.Fatal("token of the new issuer refused")
			}
			reviews := s.api.reviews.Load()
			other := newFakeAPI(t)
			for name, tok := range map[string]string{
				"old issuer, unknown kid":   other.sign(t, other.keys[0], "not-the-cluster's", oldIssuer, "team-a", "client", audience, time.Hour),
				"old issuer, the kid":       other.sign(t, other.keys[0], s.api.kids[0], oldIssuer, "team-a", "client", audience, time.Hour),
				"new issuer, unknown kid":   other.sign(t, other.keys[0], "not-the-cluster's", newIssuer, "team-a", "client", audience, time.Hour),
				"new issuer, the kid":       other.sign(t, other.keys[0], s.api.kids[0], newIssuer, "team-a", "client", audience, time.Hour),
				"another issuer, the kid":   other.sign(t, other.keys[0], s.api.kids[0], "https://evil.example", "team-a", "client", audience, time.Hour),
				"another issuer, other kid": other.sign(t, other.keys[0], "x", "https://evil.example", "team-a", "client", audience, time.Hour),
			} {
				time.Sleep(2 * time.Millisecond) // past KeyRefetchInterval: a refetch may happen, a review must not
				if resp, _ := s.get(t, tok, nil); resp.StatusCode != 401 {
					t.Errorf("%s: %d, want 401", name, resp.StatusCode)
				}
			}
			if got := s.api.reviews.Load() - reviews; got != 0 {
				t.Errorf("%d TokenReviews for forged tokens, want 0", got)
			}
		})
	}
}

// With a negative KeyRefetchInterval (none), a token with an unknown key
// id costs one fetch, not a loop of them.
func TestNoKeyRefetchIntervalFetchesOncePerToken(t *testing.T) {
	s := newSetup(t, Options{KeyRefetchInterval: -1})
	if resp, _ := s.get(t, s.api.token(t, "team-a", "client", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	fetches := s.api.keyFetches.Load()
	other := newFakeAPI(t)
	tok := other.sign(t, other.keys[0], "unknown", s.api.issuer, "team-a", "client", audience, time.Hour)
	done := make(chan int)
	go func() {
		resp, _ := s.get(t, tok, nil)
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		if code != 401 {
			t.Errorf("GET = %d, want 401", code)
		}
	case <-time.After(testwait.Hang):
		t.Fatalf("no answer after %v and %d key fetches", testwait.Hang, s.api.keyFetches.Load()-fetches)
	}
	if got := s.api.keyFetches.Load() - fetches; got != 1 {
		t.Errorf("%d key fetches, want 1", got)
	}
}

// However many forged tokens come, of however many issuers and key ids,
// none costs a TokenReview, and the key set and discovery are fetched at
// most once per KeyRefetchInterval: only a token the cluster's key signed
// refreshes discovery for its issuer.
func TestManyForgedTokensCostNoReviewAndFewFetches(t *testing.T) {
	for _, noReview := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoReview=%v", noReview), func(t *testing.T) { testManyForgedTokens(t, noReview) })
	}
}

func testManyForgedTokens(t *testing.T, noReview bool) {
	const forged = 300
	s := newSetup(t, Options{KeyRefetchInterval: time.Hour, NoReview: noReview})
	if resp, _ := s.get(t, s.api.token(t, "team-a", "client", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	reviews, discoveries, keyFetches := s.api.reviews.Load(), s.api.discoveries.Load(), s.api.keyFetches.Load()
	other := newFakeAPI(t)
	for i := range forged {
		kid := s.api.kids[0] // the cluster's: the signature check decides
		if i%2 == 1 {
			kid = fmt.Sprintf("kid-%d", i) // unknown: a refetch, at most once per interval
		}
		tok := other.sign(t, other.keys[0], kid, fmt.Sprintf("https://issuer-%d.example", i), "team-a", "client", audience, time.Hour)
		if _, err := s.auth.Authenticate(context.Background(), tok); !errors.Is(err, errForeignIssuer) {
			t.Fatalf("forged token %d: %v, want %v", i, err, errForeignIssuer)
		}
	}
	if got := s.api.reviews.Load() - reviews; got != 0 {
		t.Errorf("%d TokenReviews for %d forged tokens, want 0", got, forged)
	}
	if got := s.api.discoveries.Load() - discoveries; got > 1 {
		t.Errorf("%d discovery fetches for %d forged tokens within the interval, want at most 1", got, forged)
	}
	if got := s.api.keyFetches.Load() - keyFetches; got > 1 {
		t.Errorf("%d key fetches for %d forged tokens within the interval, want at most 1", got, forged)
	}
	t.Logf("%d forged tokens: %d reviews, %d discovery fetches, %d key fetches", forged,
		s.api.reviews.Load()-reviews, s.api.discoveries.Load()-discoveries, s.api.keyFetches.Load()-keyFetches)
}

// The key set remembers maxIssuers issuers discovery named. Past that, the
// oldest is forgotten, not trusted: its tokens are reviewed (the API server
// decides) and, with NoReview, refused.
func TestIssuersPastTheCapAreReviewed(t *testing.T) {
	for _, noReview := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoReview=%v", noReview), func(t *testing.T) {
			clk := newManualClock()
			s := newSetup(t, Options{NoReview: noReview, KeyRefetchInterval: time.Second, now: clk.now})
			s.api.clock = clk.now // each issuer's tokens are issued after it is taken on
			var first string
			for i := range maxIssuers + 1 {
				s.api.setIssuer(fmt.Sprintf("https://issuer-%d.example", i))
				clk.advance(2 * time.Second)
				tok := s.api.token(t, "team-a", "client", audience, time.Hour)
				if i == 0 {
					first = tok
				}
				if _, err := s.auth.Authenticate(context.Background(), tok); err != nil {
					t.Fatalf("token of issuer %d: %v", i, err)
				}
			}
			reviews := s.api.reviews.Load()
			clk.advance(11 * time.Second) // past the cached verdict
			_, err := s.auth.Authenticate(context.Background(), first)
			switch {
			case noReview && !errors.Is(err, errUnknownIssuer):
				t.Errorf("NoReview: token of the forgotten issuer = %v, want %v", err, errUnknownIssuer)
			case !noReview && (err != nil || s.api.reviews.Load()-reviews != 1):
				t.Errorf("token of the forgotten issuer = %v after %d reviews, want accepted after 1", err, s.api.reviews.Load()-reviews)
			}
		})
	}
}

// defaultLeeway is Options.Leeway's default: a fetch tells about a token
// only that much past its iat.
const defaultLeeway = 10 * time.Second

// issuedAt is the iat claim of tok, unverified.
func issuedAt(t *testing.T, tok string) time.Time {
	t.Helper()
	parsed, err := jwt.ParseSigned(tok, algorithms)
	if err != nil {
		t.Fatal(err)
	}
	var claims jwt.Claims
	if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil || claims.IssuedAt == nil {
		t.Fatalf("no iat in the token: %v", err)
	}
	return claims.IssuedAt.Time()
}

// Under NoReview a token of the cluster's key whose issuer discovery did
// not name when last fetched fetches discovery again at once, not after
// KeyRefetchInterval: the new issuer's tokens are served from the first.
// Tokens of an issuer discovery does not name, issued well before a fetch,
// are refused without another; forged ones keep the interval
// (TestManyForgedTokensCostNoReviewAndFewFetches).
func TestNoReviewNewIssuerIsServedAtOnce(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{NoReview: true, KeyRefetchInterval: time.Hour, now: clk.now})
	if resp, _ := s.get(t, s.api.token(t, "team-a", "old", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	s.api.setIssuer(newIssuer)
	clk.advance(2 * time.Second) // well within KeyRefetchInterval
	discoveries := s.api.discoveries.Load()
	fresh := s.api.token(t, "team-a", "new", audience, time.Hour)
	if resp, _ := s.get(t, fresh, nil); resp.StatusCode != 200 {
		t.Errorf("token of the new issuer within KeyRefetchInterval of the last fetch = %d, want 200", resp.StatusCode)
	}
	if got := s.api.discoveries.Load() - discoveries; got != 1 {
		t.Errorf("%d discovery fetches for the new issuer, want 1", got)
	}

	// Tokens of the cluster's key naming issuers it never named: once a
	// fetch is surely later than they were issued, refused, with no fetch
	// each.
	clk.advance(defaultLeeway + 2*time.Second)
	discoveries = s.api.discoveries.Load()
	for i := range 20 {
		tok := s.api.tokenOf(t, fmt.Sprintf("https://never-%d.example", i%2), "team-a", "other", audience, time.Hour)
		if resp, _ := s.get(t, tok, nil); resp.StatusCode != 401 {
			t.Errorf("token %d of an issuer discovery never named = %d, want 401", i, resp.StatusCode)
		}
	}
	if got := s.api.discoveries.Load() - discoveries; got > 1 {
		t.Errorf("%d discovery fetches for 20 tokens of issuers discovery never named, want at most 1", got)
	}
	if s.api.reviews.Load() != 0 {
		t.Errorf("NoReview sent %d TokenReviews", s.api.reviews.Load())
	}
}

// Under NoReview, while discovery cannot be fetched, a token of the
// cluster's key with an issuer discovery did not name gets 503 with
// Retry-After, not 401: nothing can tell yet whether the cluster took on
// its issuer. Once discovery answers, it is served.
func TestNoReviewNewIssuerDuringAnOutageIs503(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{NoReview: true, KeyRefetchInterval: time.Hour, now: clk.now})
	if resp, _ := s.get(t, s.api.token(t, "team-a", "old", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	s.api.setIssuer(newIssuer)
	s.api.setDown(true)
	clk.advance(2 * time.Second)
	fresh := s.api.token(t, "team-a", "new", audience, time.Hour)
	resp, _ := s.get(t, fresh, nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("token of the new issuer while discovery fails = %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, err := s.auth.Authenticate(context.Background(), fresh); !errors.Is(err, errUnavailable) {
		t.Errorf("Authenticate = %v, want %v", err, errUnavailable)
	}
	s.api.setDown(false)
	clk.advance(time.Second) // the failure is remembered for a moment
	if resp, _ := s.get(t, fresh, nil); resp.StatusCode != 200 {
		t.Errorf("token of the new issuer once discovery answers = %d, want 200", resp.StatusCode)
	}
}

// A fetch tells about a token only when it began after the token was
// issued, as far as the clocks can say (iat holds whole seconds; the API
// server's clock may be Leeway off). Under NoReview, a token of an issuer
// discovery does not name gets 503 with Retry-After until such a fetch,
// one a second at most meanwhile, then 401 with no more fetches.
func TestNoReviewIssuerIsUnsettledUntilAFetchAfterTheToken(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{NoReview: true, KeyRefetchInterval: time.Hour, now: clk.now})
	old := s.api.token(t, "team-a", "old", audience, time.Hour)
	s.api.setIssuer(newIssuer)
	// The first fetch (discovery names the new issuer only) half a second
	// into the old token's second.
	iat := issuedAt(t, old)
	clk.advance(iat.Add(500 * time.Millisecond).Sub(clk.now()))
	if resp, _ := s.get(t, s.api.token(t, "team-a", "new", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Fatal("token of the discovery's issuer refused")
	}
	discoveries := s.api.discoveries.Load()
	for range 3 {
		resp, _ := s.get(t, old, nil)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("old issuer's token, discovery fetched just after it = %d, want 503 with Retry-After", resp.StatusCode)
		}
	}
	if got := s.api.discoveries.Load() - discoveries; got != 0 {
		t.Errorf("%d discovery fetches within a second of the last, want 0", got)
	}
	clk.advance(time.Second)
	if resp, _ := s.get(t, old, nil); resp.StatusCode != 503 {
		t.Errorf("old issuer's token a second later, still within the leeway = %d, want 503", resp.StatusCode)
	}
	if got := s.api.discoveries.Load() - discoveries; got != 1 {
		t.Errorf("%d discovery fetches a second later, want 1", got)
	}
	clk.advance(iat.Add(time.Second + defaultLeeway).Sub(clk.now()))
	for range 3 {
		if resp, _ := s.get(t, old, nil); resp.StatusCode != 401 {
			t.Errorf("old issuer's token once a fetch is surely later = %d, want 401", resp.StatusCode)
		}
	}
	if got := s.api.discoveries.Load() - discoveries; got != 2 {
		t.Errorf("%d discovery fetches in all, want 2", got)
	}
	if _, err := s.auth.Authenticate(context.Background(), old); !errors.Is(err, errUnknownIssuer) {
		t.Errorf("Authenticate = %v, want %v", err, errUnknownIssuer)
	}
}
