package addonauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/authvault/authvault/testkit/testpki"
)

// rawCA is a CA whose key the test holds, for chains and odd leaves that
// testpki does not make.
type rawCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var attackSerial atomic.Int64

func newRawCA(t *testing.T, parent *rawCA, cn string) *rawCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1000 + attackSerial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &rawCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf is a certificate for cn signed by ca, changed by edit, presented
// with the chain after it.
func (ca *rawCA) leaf(t *testing.T, cn string, edit func(*x509.Certificate), chain ...*rawCA) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1000 + attackSerial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	out := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	for _, c := range chain {
		out.Certificate = append(out.Certificate, c.cert.Raw)
	}
	return out
}

func (s *frontSetup) clientWithCert(t *testing.T, cert tls.Certificate) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.ca.Pool, Certificates: []tls.Certificate{cert}}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Certificates at the edges of the x509 check: only a client-auth leaf of
// the CA, in its validity, through an intermediate the CA signed, is a
// front proxy's; the rest are bearer callers (401 without a token).
func TestFrontProxyCertificateEdges(t *testing.T) {
	root := newRawCA(t, nil, "front-proxy-ca")
	inter := newRawCA(t, root, "front-proxy-intermediate")
	// An intermediate whose EKU allows only serverAuth may not vouch for a
	// client certificate below it (EKUs nest).
	serverOnlyInter := func() *rawCA {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1000 + attackSerial.Add(1)), Subject: pkix.Name{CommonName: "server-only-intermediate"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, root.cert, &key.PublicKey, root.key)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return &rawCA{cert: c, key: key}
	}()
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, root.pem), AllowedNames: []string{"front-proxy-client"}}, Options{})
	for _, c := range []struct {
		name string
		cert tls.Certificate
		want int
	}{
		{"a leaf of the CA", root.leaf(t, "front-proxy-client", nil), 200},
		{"a leaf through an intermediate, chain sent", inter.leaf(t, "front-proxy-client", nil, inter), 200},
		{"a leaf through an intermediate, chain not sent", inter.leaf(t, "front-proxy-client", nil), 401},
		{"the intermediate's CN allowed, the leaf's not", inter.leaf(t, "mallory", nil, inter), 401},
		{"serverAuth only", root.leaf(t, "front-proxy-client", func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }), 401},
		{"an intermediate that may only vouch for servers", serverOnlyInter.leaf(t, "front-proxy-client", nil, serverOnlyInter), 401},
		{"expired", root.leaf(t, "front-proxy-client", func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
		}), 401},
		{"not yet valid", root.leaf(t, "front-proxy-client", func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)
		}), 401},
		{"allowed name only as an O, CN another", root.leaf(t, "mallory", func(c *x509.Certificate) { c.Subject.Organization = []string{"front-proxy-client"} }), 401},
		{"allowed name only as a DNS SAN", root.leaf(t, "mallory", func(c *x509.Certificate) { c.DNSNames = []string{"front-proxy-client"} }), 401},
		{"allowed name with a case change", root.leaf(t, "Front-Proxy-Client", nil), 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := s.up.count()
			resp, body := s.get(t, s.clientWithCert(t, c.cert), aggregator)
			if resp.StatusCode != c.want {
				t.Fatalf("GET = %d %q, want %d; log:\n%s", resp.StatusCode, body, c.want, s.log())
			}
			if c.want != 200 && s.up.count() != before {
				t.Errorf("the upstream was reached")
			}
		})
	}
}

// A front proxy vouches for one caller: a second X-Remote-User, the
// X-Authenticated-* family (which the upstream trusts) and underscores
// bring the upstream no second identity.
func TestFrontProxyCallerCannotSmuggleASecondIdentity(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM), AllowedNames: []string{"front-proxy-client"}}, Options{})
	h := http.Header{
		"X-Remote-User":                {"alice", "system:admin"},
		"X-Remote-Group":               {"devs"},
		"X-Authenticated-User":         {"system:admin"},
		"X-Authenticated-Groups":       {"system:masters"},
		"X-Authenticated-Uid":          {"root"},
		"X_authenticated_user":         {"system:admin"},
		"X-Authenticated-Extra-Scopes": {"*"},
		"Connection":                   {"X-Authenticated-User, X-Authenticated-Groups"},
	}
	resp, body := s.get(t, s.client(t, proxyCA, "front-proxy-client"), h)
	if resp.StatusCode != 200 {
		t.Fatalf("GET = %d %q; log:\n%s", resp.StatusCode, body, s.log())
	}
	got := s.up.seen[0]
	if v := got.Values("X-Authenticated-User"); len(v) != 1 || v[0] != "alice" {
		t.Errorf("X-Authenticated-User = %q, want only alice", v)
	}
	if v := got.Values("X-Authenticated-Groups"); strings.Join(v, ",") != "devs" {
		t.Errorf("X-Authenticated-Groups = %q, want devs", v)
	}
	for name, v := range got {
		switch {
		case strings.EqualFold(name, "X-Authenticated-User"), strings.EqualFold(name, "X-Authenticated-Groups"):
		case strings.Contains(strings.ToLower(strings.ReplaceAll(name, "_", "-")), "x-authenticated-"),
			strings.HasPrefix(strings.ToLower(name), "x-remote-"):
			t.Errorf("%s: %q reached the upstream", name, v)
		}
	}
	if u := s.up.user[0]; u.Name != "alice" || u.UID != "" || len(u.Extra) != 0 {
		t.Errorf("UserFrom = %+v: the UID header is not configured, no extras were sent by the proxy", u)
	}
}

// The configuration flips: deleted then recreated, trusted again; a
// ConfigMap unreadable at first (RBAC not yet bound) is trusted once it
// can be read.
func TestFrontProxyConfigMapRecreatedAndBecomesReadable(t *testing.T) {
	ca := testpki.NewCA(t)
	t.Run("deleted then recreated", func(t *testing.T) {
		client := fake.NewClientset(authConfigMap(ca.PEM, `["front-proxy-client"]`))
		s := newFrontSetup(t, FrontProxy{}, Options{frontProxyClient: client})
		want := func(what string, code int) {
			t.Helper()
			waitFor(t, what, func() bool {
				resp, _ := s.get(t, s.client(t, ca, "front-proxy-client"), aggregator)
				return resp.StatusCode == code
			})
		}
		cms := client.CoreV1().ConfigMaps("kube-system")
		want("trusted", 200)
		if err := cms.Delete(context.Background(), "extension-apiserver-authentication", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want("503 once deleted", 503)
		if _, err := cms.Create(context.Background(), authConfigMap(ca.PEM, `["front-proxy-client"]`), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want("trusted once recreated", 200)
	})
	t.Run("unreadable then readable", func(t *testing.T) {
		client := fake.NewClientset(authConfigMap(ca.PEM, `["front-proxy-client"]`))
		forbid := forbidLists(client)
		s := newFrontSetup(t, FrontProxy{}, Options{frontProxyClient: client})
		waitFor(t, "the log to say it cannot be read", func() bool { return strings.Contains(s.log(), "cannot be read") })
		if resp, _ := s.get(t, s.client(t, ca, "front-proxy-client"), aggregator); resp.StatusCode != 503 {
			t.Errorf("while unreadable: %d, want 503", resp.StatusCode)
		}
		forbid.Store(false)
		waitFor(t, "trusted once readable", func() bool {
			resp, _ := s.get(t, s.client(t, ca, "front-proxy-client"), aggregator)
			return resp.StatusCode == 200
		})
	})
}

// A second Start while the first runs is refused at once, and leaves the
// first following.
func TestFrontProxyStartTwiceWhileRunning(t *testing.T) {
	ca := testpki.NewCA(t)
	client := fake.NewClientset(authConfigMap(ca.PEM, `["front-proxy-client"]`))
	s := newFrontSetup(t, FrontProxy{}, Options{frontProxyClient: client})
	waitFor(t, "the first Start to follow", func() bool {
		resp, _ := s.get(t, s.client(t, ca, "front-proxy-client"), aggregator)
		return resp.StatusCode == 200
	})
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- s.auth.Start(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a second Start returned nil")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a second Start did not return")
	}
	waitFor(t, "the first Start to still follow", func() bool {
		resp, _ := s.get(t, s.client(t, ca, "front-proxy-client"), aggregator)
		return resp.StatusCode == 200
	})
}

// No token, so no rechecks: MaxRequestDuration still ends a front-proxy
// caller's stream.
func TestFrontProxyStreamEndsAtMaxRequestDuration(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM)}, Options{MaxRequestDuration: 300 * time.Millisecond})
	ended := make(chan time.Duration, 1)
	srv := httptest.NewUnstartedServer(s.auth.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.WriteHeader(200)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		ended <- time.Since(start)
	})))
	srv.TLS = s.ca.ServerTLS(t, "addon-proxy", nil)
	srv.TLS.ClientAuth = tls.RequestClientCert
	srv.StartTLS()
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/watch", nil)
	req.Header = aggregator.Clone()
	resp, err := s.client(t, proxyCA, "front-proxy-client").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	if d := <-ended; d > 5*time.Second {
		t.Errorf("the stream lasted %v, past MaxRequestDuration 300ms", d)
	}
}

// The per-user bucket is the front-proxy user's.
func TestFrontProxyCallersAreRateLimitedByUser(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM)}, Options{RatePerUser: 0.001, BurstPerUser: 1})
	c := s.client(t, proxyCA, "front-proxy-client")
	as := func(user string) http.Header { return http.Header{"X-Remote-User": {user}} }
	if resp, _ := s.get(t, c, as("alice")); resp.StatusCode != 200 {
		t.Fatalf("alice's first: %d", resp.StatusCode)
	}
	if resp, _ := s.get(t, c, as("alice")); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("alice's second: %d, want 429", resp.StatusCode)
	}
	if resp, _ := s.get(t, c, as("bob")); resp.StatusCode != 200 {
		t.Errorf("bob's first: %d, want 200: a bucket per user", resp.StatusCode)
	}
}

// A client certificate of another CA with a token: the log says why the
// certificate was not a front proxy's, and never names the token.
func TestFrontProxyRefusalLogsNoToken(t *testing.T) {
	proxyCA, otherCA := testpki.NewCA(t), testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM)}, Options{})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	for _, h := range []http.Header{
		{"Authorization": {"Bearer " + tok}, "X-Remote-User": {"alice"}},
		{"Authorization": {"Bearer " + tok + "x"}, "X-Remote-User": {"alice"}},
	} {
		s.get(t, s.client(t, otherCA, "front-proxy-client"), h)
	}
	if !strings.Contains(s.log(), "not a front proxy's") {
		t.Errorf("the log does not say the certificate was not a front proxy's:\n%s", s.log())
	}
	if strings.Contains(s.log(), tok[strings.LastIndex(tok, ".")+1:]) {
		t.Errorf("the log holds the token:\n%s", s.log())
	}
}
