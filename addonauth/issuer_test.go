package addonauth

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
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
			s := newSetup(t, Options{NoReview: tc.noReview})
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
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer after 10 s and %d key fetches", s.api.keyFetches.Load()-fetches)
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
	const forged = 300
	s := newSetup(t, Options{KeyRefetchInterval: time.Hour})
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
