package vault

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// apiServer is a TLS server that authenticates like a kube-apiserver (bearer
// tokens, basic auth, client certificates from its client CA), answers 401
// to anything else, and records what it saw.
type apiServer struct {
	srv    *httptest.Server
	prefix string

	down atomic.Bool // an authenticator outage: every request gets 401
	// closeOn401 closes the connection after each 401, as kube-apiserver
	// does for HTTP/2 (UnauthenticatedHTTP2DOSMitigation): a GOAWAY ends
	// the connection once the requests it already accepted are answered.
	closeOn401 atomic.Bool

	mu       sync.Mutex // guards the fields below
	tokens   map[string]bool
	served   map[string]int // tokens that got an answer other than 401, and how many
	basic    map[string]string
	certCNs  map[string]bool
	requests []seen
}

// seen is one request as the server saw it.
type seen struct {
	Method, Path, Auth, CertCN, Body, UserAgent, Impersonate string
	RemoteAddr                                               string // tells the connection
	Status                                                   int
}

// newAPIServer starts a server with a certificate from ca, under prefix.
func newAPIServer(t *testing.T, ca, clientCA *testpki.CA, prefix string) *apiServer {
	t.Helper()
	s := &apiServer{prefix: prefix, tokens: map[string]bool{}, served: map[string]int{}, basic: map[string]string{}, certCNs: map[string]bool{}}
	var h http.Handler = http.HandlerFunc(s.serve)
	if prefix != "" {
		mux := http.NewServeMux()
		mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
		h = mux
	}
	s.srv = httptest.NewUnstartedServer(h)
	s.srv.EnableHTTP2 = true
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes that tests make fail
	s.srv.TLS = ca.ServerTLS(t, "api", clientCA)
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server as a credential names it, prefix included.
func (s *apiServer) URL() string { return s.srv.URL + s.prefix }

func (s *apiServer) allow(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = true
}

// hasServed tells whether token was accepted at least once.
func (s *apiServer) hasServed(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[token] > 0
}

// servedTimes is how many answers other than 401 token got.
func (s *apiServer) servedTimes(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[token]
}

func (s *apiServer) revoke(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, token)
}

func (s *apiServer) allowBasic(user, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.basic[user] = password
}

func (s *apiServer) allowCert(cn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.certCNs[cn] = true
}

// seen returns the requests so far.
func (s *apiServer) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.requests...)
}

// authenticate names the user of r, or returns "".
func (s *apiServer) authenticate(r *http.Request, rec *seen) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		rec.CertCN = r.TLS.VerifiedChains[0][0].Subject.CommonName
	}
	auth := r.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(auth, "Bearer "):
		if tok := strings.TrimPrefix(auth, "Bearer "); s.tokens[tok] {
			s.served[tok]++
			return "token:" + tok
		}
		return ""
	case strings.HasPrefix(auth, "Basic "):
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(auth, "Basic "))
		user, pw, _ := strings.Cut(string(raw), ":")
		if p, ok := s.basic[user]; ok && p == pw {
			return "basic:" + user
		}
		return ""
	case rec.CertCN != "" && s.certCNs[rec.CertCN]:
		return "cert:" + rec.CertCN
	}
	return ""
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := seen{
		Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Body: string(body),
		UserAgent: r.UserAgent(), Impersonate: r.Header.Get("Impersonate-User"), RemoteAddr: r.RemoteAddr,
	}
	user := s.authenticate(r, &rec)
	if s.down.Load() {
		user = ""
	}
	rec.Status = http.StatusOK
	switch {
	case user == "":
		rec.Status = http.StatusUnauthorized
	case r.URL.Path == "/forbidden":
		rec.Status = http.StatusForbidden
	case r.URL.Path == "/redirect":
		rec.Status = http.StatusFound
	}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	switch {
	case rec.Status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="test-api"`)
		if s.closeOn401.Load() {
			w.Header().Set("Connection", "close") // HTTP/2: a GOAWAY
		}
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
	case rec.Status == http.StatusForbidden:
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
	case rec.Status == http.StatusFound:
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	case strings.HasSuffix(r.URL.Path, "/watch"):
		s.stream(w, r)
	case strings.HasSuffix(r.URL.Path, "/configmaps"):
		fmt.Fprint(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},`+
			`"items":[{"metadata":{"name":"seen-by-`+strings.ReplaceAll(user, ":", "-")+`","namespace":"default"}}]}`)
	default:
		_ = json.NewEncoder(w).Encode(map[string]string{"user": user, "path": r.URL.Path, "body": string(body)})
	}
}

// stream writes a line every few milliseconds until the client goes away.
func (s *apiServer) stream(w http.ResponseWriter, r *http.Request) {
	flusher := w.(http.Flusher)
	for i := 0; ; i++ {
		if _, err := fmt.Fprintf(w, "event %d\n", i); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// issuer is a login handler that mints a new token on each login and has
// srv accept it.
type issuer struct {
	srv      *apiServer
	caPEM    []byte
	mu       sync.Mutex // guards issued and issuedAt
	issued   []string
	issuedAt time.Time // of the newest token
}

func (i *issuer) login(_ context.Context) (*login.ConnectionInfo, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	tok := fmt.Sprintf("tok-%d-%d", len(i.issued)+1, time.Now().UnixNano())
	i.issued = append(i.issued, tok)
	i.issuedAt = time.Now()
	i.srv.allow(tok)
	return &login.ConnectionInfo{Server: i.srv.URL(), CAData: i.caPEM, Token: tok}, nil
}

// newest is the last token issued and when, or "".
func (i *issuer) newest() (string, time.Time) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(i.issued) == 0 {
		return "", time.Time{}
	}
	return i.issued[len(i.issued)-1], i.issuedAt
}

func (i *issuer) latest() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.issued[len(i.issued)-1]
}

func (i *issuer) count() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.issued)
}

// issuingVault is a vault whose one handler mints tokens that a new server
// under prefix accepts.
func issuingVault(t *testing.T, opts Options, prefix string, loginOpts ...login.Option) (*Vault, *apiServer, *issuer) {
	t.Helper()
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, prefix)
	iss := &issuer{srv: srv, caPEM: ca.PEM}
	v := New(opts)
	t.Cleanup(v.Close)
	v.OnLogin(iss.login, loginOpts...)
	return v, srv, iss
}

// tokenVault is a vault whose one handler always returns token, for a new
// server under no prefix that accepts it.
func tokenVault(t *testing.T, token string) (*Vault, *apiServer, *testpki.CA) {
	t.Helper()
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, "")
	srv.allow(token)
	v := New(Options{})
	t.Cleanup(v.Close)
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: token}))
	return v, srv, ca
}
