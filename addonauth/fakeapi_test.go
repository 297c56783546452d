package addonauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
)

// fakeAPI serves what the Authenticator asks an API server for: issuer
// discovery, its keys, and TokenReview, and counts what it is asked. It
// stands in for kube-apiserver in the unit tests; the integration suite
// runs the same cases against the real one.
type fakeAPI struct {
	srv *httptest.Server

	mu       sync.Mutex
	issuer   string              // the one discovery names; setIssuer changes it
	keys     []*ecdsa.PrivateKey // published; the first signs
	kids     []string
	accepted map[string]authnv1.UserInfo // token → user; others are denied
	down     bool                        // every request answers 503
	hung     chan struct{}               // non-nil: every request waits for its close, or its caller to leave
	hangsOn  map[string]bool             // tokens whose review waits for its caller to leave (a hung webhook behind the API server)

	allowed map[string]bool // "user verb path" the SubjectAccessReviews allow

	reviews, keyFetches, accessReviews, discoveries atomic.Int64
	reviewDelay                                     time.Duration
	// clock, when set, is the time tokens are issued at: the API server's
	// clock, for a test whose Authenticator's clock is not the real one.
	clock func() time.Time
}

func newFakeAPI(t testing.TB) *fakeAPI {
	t.Helper()
	f := &fakeAPI{issuer: "https://kubernetes.default.svc.cluster.local", accepted: map[string]authnv1.UserInfo{}, allowed: map[string]bool{}}
	f.rotateKey(t)
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { f.setHung(false) }) // before Close, which waits for every request
	return f
}

func (f *fakeAPI) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	// JSON: the fake decodes only that; the real API server takes what
	// client-go sends by default.
	return &rest.Config{Host: f.srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
}

// rotateKey adds a new signing key, published beside the old ones.
func (f *fakeAPI) rotateKey(t testing.TB) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append([]*ecdsa.PrivateKey{key}, f.keys...)
	f.kids = append([]string{"key-" + strconv.Itoa(len(f.kids)+1)}, f.kids...)
}

func (f *fakeAPI) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// setHung makes every request wait, as an API server under SIGSTOP does,
// until setHung(false) or until its caller gives up.
func (f *fakeAPI) setHung(hung bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case hung && f.hung == nil:
		f.hung = make(chan struct{})
	case !hung && f.hung != nil:
		close(f.hung)
		f.hung = nil
	}
}

// setIssuer changes the issuer discovery names and new tokens carry, as an
// API server restarted with --service-account-issuer=iss (followed by the
// old one: the fake accepts every token it signed, whatever its issuer).
func (f *fakeAPI) setIssuer(iss string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.issuer = iss
}

// hangOn makes the API server's review of tok wait until its caller gives
// up, as one that a hung webhook token authenticator must answer does.
func (f *fakeAPI) hangOn(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hangsOn == nil {
		f.hangsOn = map[string]bool{}
	}
	f.hangsOn[tok] = true
}

// accept makes the API server accept tok as user's.
func (f *fakeAPI) accept(tok string, user authnv1.UserInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accepted[tok] = user
}

// token signs a service-account token for ns/name with audience aud that
// expires after life, and makes the API server accept it unless revoked.
func (f *fakeAPI) token(t testing.TB, ns, name, aud string, life time.Duration) string {
	t.Helper()
	f.mu.Lock()
	iss := f.issuer
	f.mu.Unlock()
	return f.tokenOf(t, iss, ns, name, aud, life)
}

// tokenOf is token with the issuer iss, signed with the API server's key.
func (f *fakeAPI) tokenOf(t testing.TB, iss, ns, name, aud string, life time.Duration) string {
	t.Helper()
	f.mu.Lock()
	key, kid := f.keys[0], f.kids[0]
	f.mu.Unlock()
	tok := f.sign(t, key, kid, iss, ns, name, aud, life)
	f.accept(tok, authnv1.UserInfo{Username: "system:serviceaccount:" + ns + ":" + name, UID: "uid-" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}})
	return tok
}

func (f *fakeAPI) sign(t testing.TB, key *ecdsa.PrivateKey, kid, iss, ns, name, aud string, life time.Duration) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if f.clock != nil {
		now = f.clock()
	}
	std := jwt.Claims{Issuer: iss, Subject: "system:serviceaccount:" + ns + ":" + name, Audience: jwt.Audience{aud},
		Expiry: jwt.NewNumericDate(now.Add(life)), NotBefore: jwt.NewNumericDate(now), IssuedAt: jwt.NewNumericDate(now)}
	priv := map[string]any{"kubernetes.io": map[string]any{"namespace": ns, "serviceaccount": map[string]string{"name": name, "uid": "uid-" + name}}}
	tok, err := jwt.Signed(signer).Claims(std).Claims(priv).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (f *fakeAPI) revoke(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.accepted, token)
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	const reviewPath = "/apis/authentication.k8s.io/v1/tokenreviews"
	switch r.URL.Path { // every one that reaches the server, answered or not
	case reviewPath:
		f.reviews.Add(1)
	case discoveryPath:
		f.discoveries.Add(1)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		f.accessReviews.Add(1)
	}
	f.mu.Lock()
	down, hung, issuer := f.down, f.hung, f.issuer
	f.mu.Unlock()
	if hung != nil {
		select {
		case <-hung:
		case <-r.Context().Done():
			return
		}
	}
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case discoveryPath:
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": "https://unreachable.example/openid/v1/jwks"})
	case jwksPath:
		f.keyFetches.Add(1)
		f.mu.Lock()
		var set jose.JSONWebKeySet
		for i, k := range f.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: f.kids[i], Algorithm: "ES256", Use: "sig"})
		}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	case reviewPath:
		time.Sleep(f.reviewDelay)
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// As kube-apiserver's TokenReview: no token is a bad request, and
		// the token is read as it would be from "Authorization: Bearer
		// <token>": trimmed, and up to its first space.
		if tr.Spec.Token == "" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
				"message": "token is required for TokenReview in authentication", "reason": "BadRequest", "code": 400})
			return
		}
		parts := append(strings.SplitN(strings.TrimSpace("Bearer "+tr.Spec.Token), " ", 3), "")
		f.mu.Lock()
		user, ok := f.accepted[parts[1]]
		hangs := f.hangsOn[parts[1]]
		f.mu.Unlock()
		if hangs {
			<-r.Context().Done()
			return
		}
		ok = ok && parts[1] != ""
		tr.Spec.Token = ""
		if ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: user, Audiences: tr.Spec.Audiences}
		} else {
			tr.Status = authnv1.TokenReviewStatus{Error: "token rejected"}
		}
		tr.Kind, tr.APIVersion = "TokenReview", "authentication.k8s.io/v1"
		_ = json.NewEncoder(w).Encode(tr)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var sar authzv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		q := sar.Spec.User + " "
		if a := sar.Spec.NonResourceAttributes; a != nil && strings.HasPrefix(a.Path, "/invalid") {
			// A question the API server finds invalid: a 400 Status.
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
				"message": "SubjectAccessReview is invalid", "reason": "BadRequest", "code": 400})
			return
		}
		if a := sar.Spec.NonResourceAttributes; a != nil {
			q += a.Verb + " " + a.Path
		} else if a := sar.Spec.ResourceAttributes; a != nil {
			q += a.Verb + " " + a.Resource + "/" + a.Subresource + " " + a.Namespace
		}
		f.mu.Lock()
		sar.Status.Allowed = f.allowed[q]
		for rule, ok := range f.allowed { // "…/*" matches as RBAC's nonResourceURLs do
			if prefix, wild := strings.CutSuffix(rule, "*"); wild && ok && strings.HasPrefix(q, prefix) {
				sar.Status.Allowed = true
			}
		}
		f.mu.Unlock()
		sar.Kind, sar.APIVersion = "SubjectAccessReview", "authorization.k8s.io/v1"
		_ = json.NewEncoder(w).Encode(sar)
	default:
		http.NotFound(w, r)
	}
}

// manualClock is a clock that moves only when a test moves it, for
// Options.now.
type manualClock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func newManualClock() *manualClock { return &manualClock{t: time.Now()} }

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
