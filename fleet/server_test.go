package fleet

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/authvault/authvault/login"
)

// apiServer is a loopback TLS server standing for a cluster's API server:
// it accepts its current token only, answers /version, and counts its open
// connections.
type apiServer struct {
	srv    *httptest.Server
	token  atomic.Pointer[string]
	open   atomic.Int64 // connections open now
	served atomic.Int64 // requests answered 200

	mu      sync.Mutex // guards tokens
	tokens  []string   // every token seen, in order
	rotated int
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+*s.token.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`)
			return
		}
		s.served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"36","gitVersion":"v1.36.3"}`)
	}))
	s.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			s.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.open.Add(-1)
		}
	}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	s.rotate()
	return s
}

// rotate gives the server a new token; the old one is rejected from now on.
func (s *apiServer) rotate() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotated++
	tok := fmt.Sprintf("token-%p-%d", s, s.rotated)
	s.token.Store(&tok)
	s.tokens = append(s.tokens, tok)
	return tok
}

// login is a handler that returns the server's current token.
func (s *apiServer) login(context.Context) (*login.ConnectionInfo, error) {
	return &login.ConnectionInfo{Server: s.srv.URL, CAData: s.caPEM(), Token: *s.token.Load()}, nil
}

func (s *apiServer) caPEM() []byte {
	return []byte("-----BEGIN CERTIFICATE-----\n" + base64.StdEncoding.EncodeToString(s.srv.Certificate().Raw) + "\n-----END CERTIFICATE-----\n")
}

// kubeconfig is a Cluster API style kubeconfig for the server with its
// current token.
func (s *apiServer) kubeconfig() []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: admin@c, context: {cluster: c, user: admin}}]
current-context: admin@c
`, s.srv.URL, base64.StdEncoding.EncodeToString(s.caPEM()), *s.token.Load()))
}
