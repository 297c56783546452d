package vault

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/internal/testpki"
	"github.com/authvault/authvault/login"
)

// Item 12, variant: a request whose Authorization header sits under a
// non-canonical key ("authorization", as code that builds http.Header
// literals or copies HTTP/2 headers writes it) is not seen as bringing its
// own Authorization (Header.Get canonicalizes the lookup key only). The
// vault then reroutes it to the selected credential's server and adds its
// own header next to the caller's: server b receives a's token.
func TestReviewNonCanonicalAuthorizationKeyIsRerouted(t *testing.T) {
	ca := testpki.NewCA(t)
	a := newAPIServer(t, ca, nil, "")
	a.allow("token-a")
	a.allow("callers-own")
	var mu sync.Mutex
	var atB [][]string // every Authorization value b received, per request
	b := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		atB = append(atB, r.Header.Values("Authorization"))
		mu.Unlock()
	}))
	b.EnableHTTP2 = true
	b.TLS = ca.ServerTLS(t, "api", nil)
	b.StartTLS()
	defer b.Close()
	v := New(Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: a.URL(), CAData: ca.PEM, Token: "token-a"}), login.ID("a"))
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: b.URL + "/k8s/clusters/c-1", CAData: ca.PEM, Token: "token-b"}), login.ID("b"))
	mustSelect(t, v)
	eventually(t, "both credentials", func() bool { return v.snap.Load().size() == 2 })
	for range 40 {
		req, _ := http.NewRequest(http.MethodGet, a.URL()+"/api/v1/namespaces", nil)
		req.Header["authorization"] = []string{"Bearer callers-own"} // not canonical
		send(t, v, req)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(atB) > 0 {
		t.Errorf("server b received %d of 40 requests meant for server a; Authorization values of the first: %q", len(atB), atB[0])
	}
}

// Doc/code mismatch (transport.go, doc.go "Where credentials go"): a
// request with its own Authorization is said to go "with the TLS settings of
// a credential for that server but no credential". When that credential has
// its own Transport (piggyback's client-go transport for an exec plugin or
// auth provider that gives a client certificate), the request goes through
// that Transport and presents the credential's client certificate: the
// apiserver authenticates x509 first, so the request runs as the vault's
// identity, not the caller's.
func TestReviewOwnAuthorizationGetsOwnTransportsClientCertificate(t *testing.T) {
	ca := testpki.NewCA(t)
	clientCA := testpki.NewCA(t)
	a := newAPIServer(t, ca, clientCA, "")
	a.allowCert("vault-identity")
	a.allow("callers-own")
	certPEM, keyPEM := clientCA.Issue(t, "vault-identity", false)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	own := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}
	defer own.CloseIdleConnections()
	v := New(Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: a.URL(), Transport: own}))
	mustSelect(t, v)
	req, _ := http.NewRequest(http.MethodGet, a.URL()+"/api/v1/namespaces", nil)
	req.Header.Set("Authorization", "Bearer callers-own")
	send(t, v, req)
	for _, r := range a.seen() {
		if r.Auth == "Bearer callers-own" && r.CertCN != "" {
			t.Errorf("a request with its own Authorization presented the credential's client certificate (CN %q)", r.CertCN)
		}
	}
}

// Item 1, variant: handlers.Static (or a TokenFile whose JWT has expired)
// with a credential whose Expiration is already past. accept refuses it with
// ErrExpired, which is retryable inside the round: with default options
// (unlimited retries) a caller without a deadline waits forever, exactly the
// hang item 1 fixed for a rejected static token. It should end the handler's
// part of the round as "nothing" does and give a LoginError naming
// ErrExpired.
func TestReviewExpiredStaticCredentialHangsCallers(t *testing.T) {
	v := New(Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(handlerOf(login.ConnectionInfo{
		Server: "https://api.example:6443", Token: "t", Expiration: time.Now().Add(-time.Hour),
	}), login.ID("static"))
	done := make(chan error, 1)
	go func() {
		_, err := v.Select(context.Background()) // client-go: no deadline
		done <- err
	}()
	select {
	case err := <-done:
		var le *LoginError
		if !errors.As(err, &le) || !errors.Is(err, ErrExpired) {
			t.Errorf("Select() = %v, want a LoginError with ErrExpired", err)
		}
	case <-time.After(4 * time.Second):
		t.Errorf("Select without a deadline still waits after 4 s on a handler that only returns an expired credential")
		v.Close()
		<-done
	}
}
