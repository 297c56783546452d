package gke_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testKey is the service account's key, made once for the test binary.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

const (
	saEmail  = "vault@authvault-test.iam.gserviceaccount.com"
	audience = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/aws"
	scope    = "https://www.googleapis.com/auth/cloud-platform"
	// emailScope has Google put the service account's email in what the
	// token says of its identity, which GKE then names it by.
	emailScope = "https://www.googleapis.com/auth/userinfo.email"
)

// standIn is a loopback stand-in for Google's token endpoints: /token
// checks a service account's JWT assertion against the test's public key,
// /sts exchanges an external account's subject token (a hub's token, as a
// workload identity pool provider checks it, once a pool is set), and
// /v1/projects/-/serviceAccounts/ impersonates a service account (the IAM
// Service Account Credentials API). Each answers a new access token, valid
// for expiresIn (impersonatedIn for an impersonated one).
type standIn struct {
	t   *testing.T
	srv *httptest.Server

	expiresIn    atomic.Int64 // seconds
	echo         atomic.Bool  // answer 400 with a body that quotes the request
	hang         atomic.Bool  // answer only when the request's context ends
	subjectToken string       // what /sts expects
	down         atomic.Int64 // answer 503 to this many more requests

	pool           atomic.Pointer[pool] // nil: /sts expects subjectToken
	impersonatedIn atomic.Int64         // seconds
	echoIAM        atomic.Bool          // impersonation answers 403 quoting the request's Authorization
	stsCalls       atomic.Int64         // exchanges a pool checked (not those down answered)
	iamCalls       atomic.Int64         // impersonations asked

	release chan struct{} // closed when the test ends: no handler outlives it

	issued    atomic.Int64
	revokeAt  atomic.Int64 // the token of this number is revoked as it is issued; 0: none
	mu        sync.Mutex   // guards assertion, scopes, tokens and subjects
	assertion string       // the last assertion /token got
	scopes    [][]string   // the scopes of each token asked for, in order
	tokens    map[string]grant
	subjects  []string // the subject tokens a pool was asked to exchange, in order
}

// asked returns the scopes of each token asked for so far.
func (g *standIn) asked() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.scopes)
}

// scoped records the scopes of a request, space-separated in asked, and
// tells whether they let the token call GKE (cloud-platform among them).
func (g *standIn) scoped(asked string) bool {
	scopes := strings.Fields(asked)
	g.mu.Lock()
	g.scopes = append(g.scopes, scopes)
	g.mu.Unlock()
	return slices.Contains(scopes, scope)
}

// grant is what the stand-in knows of a token it issued, for /tokeninfo.
type grant struct {
	expiry  time.Time
	revoked bool
	who     string // whom tokeninfo names
}

func newStandIn(t *testing.T) *standIn {
	g := &standIn{t: t, subjectToken: "subject-token-from-another-cloud", release: make(chan struct{}), tokens: map[string]grant{}}
	g.expiresIn.Store(3600)
	g.impersonatedIn.Store(3600)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", g.token)
	mux.HandleFunc("POST /sts", g.sts)
	mux.HandleFunc("GET /tokeninfo", g.tokenInfo)
	mux.HandleFunc("POST /v1/projects/-/serviceAccounts/{call}", g.generateAccessToken)
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	t.Cleanup(func() { close(g.release) }) // before Close, which waits for handlers
	return g
}

// token is the service-account flow: RFC 7523's JWT bearer grant.
func (g *standIn) token(w http.ResponseWriter, r *http.Request) {
	if g.answered(w, r) {
		return
	}
	g.mu.Lock()
	g.assertion = r.PostFormValue("assertion")
	g.mu.Unlock()
	if gt := r.PostFormValue("grant_type"); gt != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		g.fail(w, "grant_type %q", gt)
		return
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(r.PostFormValue("assertion"), claims, func(*jwt.Token) (any, error) {
		return &testKey().PublicKey, nil
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(saEmail), jwt.WithAudience(g.srv.URL+"/token"), jwt.WithExpirationRequired())
	if err != nil {
		g.fail(w, "assertion: %v", err)
		return
	}
	if asked, _ := claims["scope"].(string); !g.scoped(asked) {
		g.fail(w, "scope %v", claims["scope"])
		return
	}
	g.issue(w, "ya29.sa-")
}

// sts is the external-account flow: RFC 8693's token exchange.
func (g *standIn) sts(w http.ResponseWriter, r *http.Request) {
	p := g.pool.Load()
	if p != nil {
		g.note(r)
	}
	if g.answered(w, r) {
		return
	}
	if p != nil {
		g.exchange(w, r, p)
		return
	}
	for k, want := range map[string]string{
		"grant_type":           "urn:ietf:params:oauth:grant-type:token-exchange",
		"subject_token":        g.subjectToken,
		"subject_token_type":   "urn:ietf:params:oauth:token-type:jwt",
		"audience":             audience,
		"requested_token_type": "urn:ietf:params:oauth:token-type:access_token",
	} {
		if got := r.PostFormValue(k); got != want {
			g.fail(w, "%s: got %q, want %q", k, got, want)
			return
		}
	}
	if asked := r.PostFormValue("scope"); !g.scoped(asked) {
		g.fail(w, "scope: got %q, want %s among them", asked, scope)
		return
	}
	g.issue(w, "ya29.sts-")
}

// answered handles the failure modes: it tells whether it answered.
func (g *standIn) answered(w http.ResponseWriter, r *http.Request) bool {
	switch n := g.down.Load(); {
	case n > 0 && g.down.CompareAndSwap(n, n-1):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprint(w, `{"error":{"code":503,"message":"The service is currently unavailable.","status":"UNAVAILABLE"}}`)
		return true
	case g.hang.Load():
		_ = r.ParseForm() // the server sees a client leave only once the body is read
		select {
		case <-r.Context().Done():
		case <-g.release:
		}
		return true
	case g.echo.Load():
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		g.mu.Lock()
		g.assertion = r.PostFormValue("assertion")
		g.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"error": "invalid_grant", "error_description": "you sent " + r.PostForm.Encode()})
		return true
	}
	return false
}

func (g *standIn) fail(w http.ResponseWriter, format string, args ...any) {
	g.t.Errorf("google stand-in: "+format, args...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = fmt.Fprint(w, `{"error":"invalid_request"}`)
}

func (g *standIn) issue(w http.ResponseWriter, prefix string) {
	g.issueAs(w, prefix, saEmail)
}

// issueAs answers a new token, which tokeninfo says speaks for who.
func (g *standIn) issueAs(w http.ResponseWriter, prefix, who string) {
	tok, _ := g.mint(prefix, who, g.expiresIn.Load())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token":      tok,
		"token_type":        "Bearer",
		"expires_in":        g.expiresIn.Load(),
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}

// mint records a new token for who, valid for life seconds.
func (g *standIn) mint(prefix, who string, life int64) (tok string, expiry time.Time) {
	n := g.issued.Add(1)
	tok = fmt.Sprintf("%s%d", prefix, n)
	expiry = time.Now().Add(time.Duration(life) * time.Second)
	g.mu.Lock()
	g.tokens[tok] = grant{expiry: expiry, revoked: n == g.revokeAt.Load(), who: who}
	g.mu.Unlock()
	return tok, expiry
}

// tokenInfo answers as Google's tokeninfo endpoint does for an access
// token: who it speaks for and for how long, or 400 invalid_token for one
// it did not issue, one expired and one revoked.
func (g *standIn) tokenInfo(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	gr, ok := g.tokens[r.URL.Query().Get("access_token")]
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	left := time.Until(gr.expiry)
	if !ok || gr.revoked || left <= 0 {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprint(w, `{"error":"invalid_token"}`)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"email": gr.who, "expires_in": int(left.Seconds())})
}

func (g *standIn) lastAssertion() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.assertion
}

// keyJSON is a service-account key file whose token_uri is the stand-in.
func (g *standIn) keyJSON() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(testKey())
	if err != nil {
		g.t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     "authvault-test",
		"private_key_id": "key-1",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   saEmail,
		"client_id":      "1",
		"token_uri":      g.srv.URL + "/token",
	})
	return b
}

// externalJSON is an external_account file whose subject token is a file
// and whose STS is the stand-in.
func (g *standIn) externalJSON() []byte {
	path := filepath.Join(g.t.TempDir(), "subject-token")
	if err := os.WriteFile(path, []byte(g.subjectToken), 0o600); err != nil {
		g.t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{
		"type":               "external_account",
		"audience":           audience,
		"subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
		"token_url":          g.srv.URL + "/sts",
		"credential_source":  map[string]string{"file": path},
	})
	return b
}

// expiry is when a token issued now by the stand-in expires.
func (g *standIn) expiry() time.Time {
	return time.Now().Add(time.Duration(g.expiresIn.Load()) * time.Second)
}

// testCA is a CA certificate for the cluster, in PEM.
var testCA = sync.OnceValue(func() []byte {
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gke-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &testKey().PublicKey, testKey())
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
})

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }

func testKeyPEM() []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(testKey())
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// pemBody is the middle line of a PEM block: a piece of the key that any
// leak of it would show.
func pemBody(p []byte) string {
	lines := strings.Split(string(p), "\n")
	return lines[len(lines)/2]
}
