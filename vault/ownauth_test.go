package vault

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

// A request whose Authorization sits under a key that is not canonical
// ("authorization": an http.Header literal, headers copied from HTTP/2)
// brings its own Authorization all the same: it keeps its host, and the
// vault adds no header of its own next to it.
func TestOwnAuthorizationUnderALowerCaseKeyKeepsItsHost(t *testing.T) {
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

// A request with its own Authorization never goes through a credential's
// own Transport, which may authenticate by itself (a client certificate,
// an auth provider, impersonation): the caller's Authorization must be the
// only authentication it carries.
func TestOwnAuthorizationNeverGoesThroughACredentialsOwnTransport(t *testing.T) {
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
	// The plain transport carries it: it does not trust the test's CA, so
	// the request fails before it is sent, which is what this vault can
	// do without the Transport's authentication.
	if resp, err := v.Transport().RoundTrip(req); err == nil {
		resp.Body.Close()
	}
	for _, r := range a.seen() {
		if r.Auth == "Bearer callers-own" && r.CertCN != "" {
			t.Errorf("a request with its own Authorization presented the credential's client certificate (CN %q)", r.CertCN)
		}
	}
}

// A handler that gives only an expired credential (a static one, a token
// file no one rotates) ends its part of the login: a caller without a
// deadline gets a LoginError naming errExpired.
func TestExpiredStaticCredentialFailsFast(t *testing.T) {
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
		if !errors.As(err, &le) || !errors.Is(err, errExpired) {
			t.Errorf("Select() = %v, want a LoginError with errExpired", err)
		}
	case <-time.After(testwait.Hang):
		t.Errorf("Select without a deadline still waits after %v on a handler that only returns an expired credential", testwait.Hang)
		v.Close()
		<-done
	}
}

// nilBody401 answers its first request 401 without a body, breaking the
// RoundTripper contract, and every later one 200.
type nilBody401 struct{ calls atomic.Int32 }

func (t *nilBody401) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.calls.Add(1) == 1 {
		return &http.Response{StatusCode: 401, Status: "401 Unauthorized", Header: http.Header{}, Request: req}, nil
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// A credential's own Transport that answers 401 with a nil Body costs the
// request its replay, not the process.
func TestOwnTransportsBodilessRejectionIsReplayed(t *testing.T) {
	v := New(Options{NoFallback: true})
	defer v.Close()
	shared := &nilBody401{}
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		// A new round tripper per login: the same one again would be the
		// credential just invalidated.
		return &login.ConnectionInfo{Server: "https://own.example", Transport: &struct{ http.RoundTripper }{shared}}, nil
	}, login.Backoff(time.Millisecond, time.Millisecond))
	resp, err := (&http.Client{Transport: v.Transport()}).Get("https://own.example/x")
	if err != nil {
		t.Fatalf("GET = %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || shared.calls.Load() != 2 {
		t.Errorf("GET = %d after %d calls, want 200 after the replay", resp.StatusCode, shared.calls.Load())
	}
}
