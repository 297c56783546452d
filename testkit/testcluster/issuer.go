// Package testcluster runs a real kube-apiserver and etcd (controller-runtime's
// envtest, with binaries from hack/envtest.sh) whose bearer tokens come from a
// token issuer of its own: a webhook token authenticator that tests and the
// rotation demo use to issue, expire and revoke tokens at will, and that asks
// a test's own authenticator (a cloud's, against the cloud's stand-in) about
// the tokens it did not issue.
package testcluster

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// Issuer issues bearer tokens and answers the API server's TokenReviews
// for them (authentication.k8s.io/v1). A token is valid from its issue until
// it expires or is revoked, while the issuer is not in an outage. A token it
// did not issue is refused, unless SetAccept gave it someone to ask.
type Issuer struct {
	srv *httptest.Server

	mu     sync.Mutex // guards tokens
	tokens map[string]token

	accept   atomic.Pointer[AcceptFunc] // nil: tokens of others are refused
	outage   atomic.Bool
	issued   atomic.Int64
	reviews  atomic.Int64
	rejected atomic.Int64
}

type token struct {
	expires time.Time // zero: never
	revoked bool
}

// User is who every valid token authenticates as: a cluster admin.
const User = "authvault-tester"

func newIssuer(srv *httptest.Server) *Issuer {
	i := &Issuer{srv: srv, tokens: map[string]token{}}
	srv.Config.Handler = http.HandlerFunc(i.review)
	return i
}

// Issue returns a new token that expires after ttl (0: never).
func (i *Issuer) Issue(ttl time.Duration) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := "av-" + hex.EncodeToString(b)
	t := token{}
	if ttl > 0 {
		t.expires = time.Now().Add(ttl)
	}
	i.mu.Lock()
	i.tokens[tok] = t
	i.mu.Unlock()
	i.issued.Add(1)
	return tok
}

// Revoke makes tok invalid. The API server notices when its cache of the
// last review (ReviewCacheTTL) runs out.
func (i *Issuer) Revoke(tok string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if t, ok := i.tokens[tok]; ok {
		t.revoked = true
		i.tokens[tok] = t
	}
}

// AcceptFunc decides on a token the issuer did not issue: ok says the
// token is valid, user is who it authenticates as.
type AcceptFunc func(token string) (user string, ok bool)

// SetAccept makes the issuer ask accept about every token it did not issue,
// from the next review on (nil: refuse them, the default): a test's own
// authenticator behind the same webhook, such as one that asks a cloud's
// stand-in whether the token is good, as a cloud's authenticator asks the
// cloud. A token accepted so is in the groups User is in. accept is called
// from the webhook's handler, concurrently with itself, and never during an
// outage; tokens the issuer issued never reach it, revoked or not.
func (i *Issuer) SetAccept(accept AcceptFunc) {
	if accept == nil {
		i.accept.Store(nil)
		return
	}
	i.accept.Store(&accept)
}

// SetOutage makes every review fail with an error (true), or work again
// (false).
func (i *Issuer) SetOutage(down bool) { i.outage.Store(down) }

// Issued, Reviews and Rejected count tokens issued, TokenReviews answered,
// and those that said no.
func (i *Issuer) Issued() int64   { return i.issued.Load() }
func (i *Issuer) Reviews() int64  { return i.reviews.Load() }
func (i *Issuer) Rejected() int64 { return i.rejected.Load() }

// authenticate says who tok authenticates as, if anyone: User for a valid
// token of the issuer's, else whom the AcceptFunc names for a token it did
// not issue.
func (i *Issuer) authenticate(tok string) (user string, ok bool) {
	i.mu.Lock()
	t, issued := i.tokens[tok]
	i.mu.Unlock()
	if issued {
		return User, !t.revoked && (t.expires.IsZero() || time.Now().Before(t.expires))
	}
	if accept := i.accept.Load(); accept != nil {
		return (*accept)(tok)
	}
	return "", false
}

func (i *Issuer) review(w http.ResponseWriter, r *http.Request) {
	i.reviews.Add(1)
	var tr authenticationv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
		http.Error(w, "bad TokenReview", http.StatusBadRequest)
		return
	}
	tr.Status = authenticationv1.TokenReviewStatus{}
	switch {
	case i.outage.Load():
		// An error in the review, which the API server turns into a 401
		// at once (an HTTP 5xx it would retry for seconds first).
		i.rejected.Add(1)
		tr.Status.Error = "authenticator outage"
	default:
		user, ok := i.authenticate(tr.Spec.Token)
		if !ok {
			i.rejected.Add(1)
			break
		}
		tr.Status.Authenticated = true
		tr.Status.User = authenticationv1.UserInfo{Username: user, Groups: []string{"system:masters", "system:authenticated"}}
	}
	tr.Spec = authenticationv1.TokenReviewSpec{}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&tr)
}

// IssueRevoking is Issue, with the token revoked revokeAfter after its
// issue (0: never).
func (i *Issuer) IssueRevoking(ttl, revokeAfter time.Duration) string {
	tok := i.Issue(ttl)
	if revokeAfter > 0 {
		time.AfterFunc(revokeAfter, func() { i.Revoke(tok) })
	}
	return tok
}

// TokenEndpoint serves plain HTTP on loopback: every GET issues a token with
// IssueRevoking(ttl, revokeAfter) and answers {"token": ..., "expires": ...},
// which is what a credential plugin fetches. hits counts the GETs; stop
// closes the endpoint.
func (i *Issuer) TokenEndpoint(ttl, revokeAfter time.Duration) (url string, hits *atomic.Int64, stop func()) {
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		resp := map[string]string{"token": i.IssueRevoking(ttl, revokeAfter)}
		if ttl > 0 {
			resp["expires"] = time.Now().Add(ttl).UTC().Format(time.RFC3339)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}))
	return srv.URL, hits, srv.Close
}
