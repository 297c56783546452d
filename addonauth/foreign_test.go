package addonauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/authvault/authvault/testkit/testwait"
)

// foreignJWT is a JWT of another issuer (an OIDC provider the API server
// trusts) signed with alg and a key of its own, expiring at exp (never when
// zero), which api accepts as alice's.
func foreignJWT(t *testing.T, api *fakeAPI, alg jose.SignatureAlgorithm, exp time.Time) string {
	t.Helper()
	var key any
	switch alg {
	case jose.HS256:
		key = []byte("a secret of the other issuer's, 32+ bytes long")
	case jose.EdDSA:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key = priv
	default:
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key = priv
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "idp-1"))
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.Claims{Issuer: "https://idp.example", Subject: "alice", Audience: jwt.Audience{audience}}
	if !exp.IsZero() {
		claims.Expiry = jwt.NewNumericDate(exp)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	api.accept(tok, authnv1.UserInfo{Username: "alice", Groups: []string{"devs"}})
	return tok
}

// An accepted foreign JWT is trusted no longer than its own exp claim: not
// from the cache, and its User says when it expires (the middleware ends a
// long request then). The claim is unverified, but it can only shorten
// access. The algorithm does not matter: only the cluster's keys are
// limited to the cluster's algorithms.
func TestForeignJWTIsNotCachedPastItsExpiry(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.HS256, jose.EdDSA} {
		t.Run(string(alg), func(t *testing.T) {
			clk := newManualClock()
			s := newSetup(t, Options{ReviewForeign: true, SuccessTTL: time.Hour, StaleIfError: time.Hour, now: clk.now})
			exp := clk.now().Add(time.Minute).Truncate(time.Second)
			tok := foreignJWT(t, s.api, alg, exp)
			u, err := s.auth.Authenticate(context.Background(), tok)
			if err != nil || u.Name != "alice" {
				t.Fatalf("Authenticate = %+v, %v; want alice", u, err)
			}
			if !u.Expires.Equal(exp) {
				t.Errorf("User.Expires = %v, want the token's exp %v", u.Expires, exp)
			}
			clk.advance(exp.Sub(clk.now()) - time.Second)
			if _, err := s.auth.Authenticate(context.Background(), tok); err != nil {
				t.Errorf("a second before exp: %v, want the cached verdict", err)
			}
			clk.advance(time.Second)
			if _, err := s.auth.Authenticate(context.Background(), tok); !errors.Is(err, errExpired) {
				t.Errorf("at exp: %v, want %v", err, errExpired)
			}
			if got, want := s.api.reviews.Load(), int64(1); got != want {
				t.Errorf("%d TokenReviews, want %d: an expired token is refused without one", got, want)
			}
		})
	}
}

// While the API server is down, a foreign JWT reviewed a moment ago is
// served stale until its exp, not past it.
func TestForeignJWTIsNotServedStalePastItsExpiry(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{ReviewForeign: true, SuccessTTL: 10 * time.Second, StaleIfError: time.Hour, now: clk.now})
	exp := clk.now().Add(time.Minute).Truncate(time.Second)
	tok := foreignJWT(t, s.api, jose.ES256, exp)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
		t.Fatalf("first GET = %d, want 200", resp.StatusCode)
	}
	s.api.setDown(true)
	clk.advance(30 * time.Second)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
		t.Errorf("GET before exp while the API server is down = %d, want 200 (stale)", resp.StatusCode)
	}
	clk.advance(exp.Sub(clk.now()))
	if resp, _ := s.get(t, tok, nil); resp.StatusCode == 200 {
		t.Errorf("GET at exp while the API server is down = 200, want 401 or 503")
	}
	if got, want := s.up.count(), 2; got != want {
		t.Errorf("%d requests reached the upstream, want %d", got, want)
	}
}

// A foreign JWT that has expired is refused without a review; one with no
// exp is reviewed as an opaque token is.
func TestForeignJWTExpiryBeforeReview(t *testing.T) {
	for _, tc := range []struct {
		name        string
		exp         time.Duration // from now; 0: no exp claim
		wantStatus  int
		wantReviews int64
	}{
		{"expired", -time.Second, 401, 0},
		{"no exp", 0, 200, 1},
		{"valid", time.Hour, 200, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t, Options{ReviewForeign: true})
			var exp time.Time
			if tc.exp != 0 {
				exp = time.Now().Add(tc.exp)
			}
			tok := foreignJWT(t, s.api, jose.ES256, exp)
			if resp, _ := s.get(t, tok, nil); resp.StatusCode != tc.wantStatus {
				t.Errorf("GET = %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if got := s.api.reviews.Load(); got != tc.wantReviews {
				t.Errorf("%d TokenReviews, want %d", got, tc.wantReviews)
			}
		})
	}
}

// A long request with a foreign JWT ends at the token's exp.
func TestForeignJWTStreamEndsAtItsExpiry(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), ReviewForeign: true, SuccessTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})))
	defer srv.Close()
	tok := foreignJWT(t, api, jose.ES256, time.Now().Add(2*time.Second))
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/watch", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch = %v %v", resp, err)
	}
	defer resp.Body.Close()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(done) }()
	select {
	case <-done:
	case <-time.After(testwait.Hang):
		t.Fatalf("the stream outlived its foreign token's exp (2 s) by %v", testwait.Hang)
	}
}

// signedPayload is a JWS of an issuer of its own over payload, as is: the
// claims another issuer may write, which go-jose's Claims would not read.
func signedPayload(t *testing.T, payload string) string {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: priv}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A foreign JWT's exp is read whatever its other claims are, and in the
// forms the API server's OIDC authenticator reads (a number, a numeric
// string): a numeric jti, or a quoted exp, iat or nbf, which the API
// server accepts, made it unread, and the token was served past its exp.
func TestForeignJWTExpiryIsReadWhateverItsOtherClaims(t *testing.T) {
	past, future := time.Now().Add(-time.Minute).Unix(), time.Now().Add(time.Hour).Unix()
	for _, tc := range []struct {
		name    string
		payload string
		want    int64 // exp; 0: none
	}{
		{"numeric jti", fmt.Sprintf(`{"iss":"https://idp.example","sub":"alice","exp":%d,"jti":7}`, past), past},
		{"quoted iat", fmt.Sprintf(`{"iss":"https://idp.example","sub":"alice","exp":%d,"iat":"%d"}`, past, past-60), past},
		{"quoted nbf", fmt.Sprintf(`{"iss":"https://idp.example","sub":"alice","exp":%d,"nbf":"%d"}`, past, past-60), past},
		{"quoted exp", fmt.Sprintf(`{"iss":"https://idp.example","sub":"alice","exp":"%d"}`, past), past},
		{"fractional exp", fmt.Sprintf(`{"iss":"https://idp.example","sub":"alice","exp":%d.5}`, past), past},
		{"future exp, numeric jti", fmt.Sprintf(`{"iss":"https://idp.example","sub":"alice","exp":%d,"jti":7}`, future), future},
		{"no exp", `{"iss":"https://idp.example","sub":"alice"}`, 0},
		{"exp not a number", `{"iss":"https://idp.example","sub":"alice","exp":"soon"}`, 0},
		{"exp out of range", `{"iss":"https://idp.example","sub":"alice","exp":1e300}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := foreignExpiry(signedPayload(t, tc.payload))
			if tc.want == 0 && !got.IsZero() || tc.want != 0 && got.Unix() != tc.want {
				t.Errorf("foreignExpiry = %v, want %v", got, time.Unix(tc.want, 0))
			}
		})
	}

	s := newSetup(t, Options{ReviewForeign: true})
	tok := signedPayload(t, fmt.Sprintf(`{"iss":"https://idp.example","sub":"alice","exp":%d,"jti":7}`, past))
	s.api.accept(tok, authnv1.UserInfo{Username: "alice"})
	if _, err := s.auth.Authenticate(context.Background(), tok); !errors.Is(err, errExpired) {
		t.Errorf("Authenticate of an expired foreign JWT with a numeric jti = %v, want %v", err, errExpired)
	}
	if got := s.api.reviews.Load(); got != 0 {
		t.Errorf("%d TokenReviews, want 0", got)
	}
}
