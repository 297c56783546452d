package addonauth

import (
	"context"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/authvault/authvault/testkit/testpki"
)

// countChecks counts the chain checks of s's front proxy.
func countChecks(s *frontSetup) *atomic.Int64 {
	var n atomic.Int64
	chain := s.auth.front.chain
	s.auth.front.chain = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		n.Add(1)
		return chain.AuthenticateRequest(r)
	})
	return &n
}

// getOn is s.get through c, failing the test unless the request went on
// a connection c had kept alive.
func (s *frontSetup) getOn(t *testing.T, c *http.Client, headers http.Header, reused bool) int {
	t.Helper()
	var got bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { got = i.Reused }})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/hello", nil)
	for k, v := range headers {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // read to its end: the connection is kept
	resp.Body.Close()
	if got != reused {
		t.Fatalf("the request went on a connection reused %v, want %v", got, reused)
	}
	return resp.StatusCode
}

// The aggregator keeps its connections alive: a connection's chain is
// checked once, not at every request.
func TestFrontProxyChainIsCheckedOncePerConnection(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM), AllowedNames: []string{"front-proxy-client"}}, Options{})
	checks := countChecks(s)
	c := s.client(t, proxyCA, "front-proxy-client")
	for i := range 20 {
		if got := s.getOn(t, c, aggregator, i > 0); got != 200 {
			t.Fatalf("request %d: %d", i, got)
		}
	}
	if n := checks.Load(); n != 1 {
		t.Errorf("%d chain checks for 20 requests on one connection, want 1", n)
	}
	// Each connection is checked on its own: another certificate, not
	// allowed, on a connection of its own is refused.
	if got := s.getOn(t, s.client(t, proxyCA, "mallory"), aggregator, false); got != http.StatusUnauthorized {
		t.Errorf("a name not allowed, on its own connection: %d, want 401", got)
	}
}

// A CA removed from the ConfigMap is refused at the next request of a
// connection checked under it, kept alive across the rotation; names no
// longer allowed too.
func TestFrontProxyKeptAliveConnectionAfterARotation(t *testing.T) {
	oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
	client := fake.NewClientset(authConfigMap(oldCA.PEM, `["front-proxy-client"]`))
	s := newFrontSetup(t, FrontProxy{}, Options{frontProxyClient: client})
	cms := client.CoreV1().ConfigMaps("kube-system")
	c := s.client(t, oldCA, "front-proxy-client")
	waitFor(t, "the CA to be trusted", func() bool { return s.getOn(t, c, aggregator, s.connUsed(c)) == 200 })
	if got := s.getOn(t, c, aggregator, true); got != 200 {
		t.Fatalf("kept alive: %d", got)
	}
	if _, err := cms.Update(context.Background(), authConfigMap(newCA.PEM, `["front-proxy-client"]`), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old CA refused on the connection it was checked on", func() bool {
		return s.getOn(t, c, aggregator, true) == http.StatusUnauthorized
	})

	c2 := s.client(t, newCA, "front-proxy-client")
	if got := s.getOn(t, c2, aggregator, false); got != 200 {
		t.Fatalf("the new CA: %d", got)
	}
	if _, err := cms.Update(context.Background(), authConfigMap(newCA.PEM, `["someone-else"]`), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a name no longer allowed refused on its kept connection", func() bool {
		return s.getOn(t, c2, aggregator, true) == http.StatusUnauthorized
	})
}

// connUsed tells whether c holds a connection to s already (its next
// request reuses it): after the first request of a waitFor.
func (s *frontSetup) connUsed(c *http.Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	used := s.used[c]
	if s.used == nil {
		s.used = map[*http.Client]bool{}
	}
	s.used[c] = true
	return used
}

// A CA file rewritten in place (the same state, a new pool) is a new
// generation too.
func TestFrontProxyKeptAliveConnectionAfterACAFileRotation(t *testing.T) {
	oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
	file := writeCA(t, oldCA.PEM)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: file}, Options{})
	c := s.client(t, oldCA, "front-proxy-client")
	if got := s.getOn(t, c, aggregator, false); got != 200 {
		t.Fatalf("before: %d", got)
	}
	if err := os.WriteFile(file+".new", newCA.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old CA refused on its kept connection", func() bool {
		return s.getOn(t, c, aggregator, true) == http.StatusUnauthorized
	})
}

// A connection whose certificate has expired is checked again at its next
// request, not served from the check made before: on a clock moved past
// the certificate's NotAfter, the chain is checked once more.
func TestFrontProxyKeptAliveConnectionPastItsCertificate(t *testing.T) {
	root := newRawCA(t, nil, "front-proxy-ca")
	clock := newManualClock()
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, root.pem)}, Options{now: clock.now})
	checks := countChecks(s)
	expires := time.Now().Add(time.Hour)
	c := s.clientWithCert(t, root.leaf(t, "front-proxy-client", func(c *x509.Certificate) { c.NotAfter = expires }))
	for i := range 3 {
		if got := s.getOn(t, c, aggregator, i > 0); got != 200 {
			t.Fatalf("request %d before its expiry: %d", i, got)
		}
	}
	if n := checks.Load(); n != 1 {
		t.Fatalf("%d chain checks before the expiry, want 1", n)
	}
	clock.advance(time.Until(expires) + time.Second)
	s.getOn(t, c, aggregator, true)
	if n := checks.Load(); n != 2 {
		t.Errorf("%d chain checks once the certificate has expired, want 2: the check made before it served past it", n)
	}
}

// The earliest expiry of a chain is its intermediate's when that comes
// first.
func TestChainExpiryIsTheEarliest(t *testing.T) {
	root := newRawCA(t, nil, "root")
	inter := newRawCA(t, root, "inter")
	leafCert := root.leaf(t, "x", nil) // 24 h
	leaf, _ := x509.ParseCertificate(leafCert.Certificate[0])
	pool := x509.NewCertPool()
	pool.AddCert(root.cert)
	opts := x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	until, ok := chainExpiry([]*x509.Certificate{leaf}, opts)
	if !ok || !until.Equal(leaf.NotAfter) {
		t.Errorf("a leaf of the root: %v %v, want %v", until, ok, leaf.NotAfter)
	}
	interLeafCert := inter.leaf(t, "x", func(c *x509.Certificate) { c.NotAfter = time.Now().Add(48 * time.Hour) })
	interLeaf, _ := x509.ParseCertificate(interLeafCert.Certificate[0])
	until, ok = chainExpiry([]*x509.Certificate{interLeaf, inter.cert}, opts)
	if !ok || !until.Before(interLeaf.NotAfter) {
		t.Errorf("through an intermediate: %v, not before the leaf's %v", until, interLeaf.NotAfter)
	}
	if _, ok := chainExpiry([]*x509.Certificate{interLeaf}, opts); ok {
		t.Error("a chain that does not verify has an expiry")
	}
}
