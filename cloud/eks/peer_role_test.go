package eks_test

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
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/aws-iam-authenticator/pkg/token"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/handlers"
)

// With -r, aws-iam-authenticator assumes the role at STS before it signs,
// as eks.Login does with Options.RoleARN: both tokens pass the Verifier as
// a session of the role. The plugin cannot be given an STS endpoint (no
// flag, and its SDK, aws-sdk-go v1.44, predates AWS_ENDPOINT_URL_STS), so
// its AssumeRole goes to the region's real host, which stsProxy answers
// with the stand-in; eks.Login's goes there too, through the Verifier's
// routed transport, since its token must name that host.
func TestAWSIAMAuthenticatorPluginAssumesTheRoleToo(t *testing.T) {
	s := newSTSStub(t)
	routeDefaultTransportTo(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cfg := pluginExec(t, testCluster, "-r", testRoleARN)
	cfg.Env = append(cfg.Env, stsProxy(t, s)...)
	plugin, err := handlers.Exec(cfg)(ctx)
	if err != nil {
		t.Fatalf("aws-iam-authenticator -r: %v", err)
	}

	routed := s.staticConfig(testKeyID, testSecret, "")
	routed.HTTPClient = &http.Client{Transport: http.DefaultTransport} // to the stand-in
	opts := s.options(routed)
	opts.STSEndpoint, opts.RoleARN = "", testRoleARN
	native, err := eks.Login(opts)(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if got := s.count("AssumeRole"); got != 2 {
		t.Errorf("the stand-in answered %d AssumeRole, want 2: one for each token", got)
	}
	session := strings.Replace(strings.Replace(testRoleARN, ":iam:", ":sts:", 1), ":role/", ":assumed-role/", 1) + "/"
	for name, tok := range map[string]string{"plugin": plugin.Token, "native": native.Token} {
		id, err := token.NewVerifier(testCluster, "aws", testRegion).Verify(tok)
		if err != nil {
			t.Errorf("%s: aws-iam-authenticator's Verifier refuses the token: %v", name, err)
			continue
		}
		// The API server maps the role (CanonicalARN) to a user.
		if id.CanonicalARN != testRoleARN || !strings.HasPrefix(id.ARN, session) || id.AccessKeyID == testKeyID {
			t.Errorf("%s: identity %s (role %s) with key %s, want a session of %s with the session's own key",
				name, id.ARN, id.CanonicalARN, id.AccessKeyID, testRoleARN)
		}
	}
}

// stsProxy starts an HTTPS proxy that takes every CONNECT to the stand-in,
// over TLS with a certificate for the region's STS host from a CA of its
// own, and returns the environment that makes the plugin use it and trust
// that CA (aws-sdk-go v1 honours HTTPS_PROXY and AWS_CA_BUNDLE).
func stsProxy(t *testing.T, s *stsStub) []clientcmdapi.ExecEnvVar {
	host := "sts." + testRegion + ".amazonaws.com"
	caPEM, cert := hostCertificate(t, host)
	front := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	front.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	front.StartTLS()
	t.Cleanup(front.Close)

	// A hijacked connection is not the server's to wait for: tunnels counts
	// the tunnels, each counted under mu before the cleanup's Wait can begin
	// (an Add from zero must come before a Wait, not beside it).
	var (
		tunnels  sync.WaitGroup
		mu       sync.Mutex // guards stopping, and orders each Add before the Wait
		stopping bool
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect || r.Host != host+":443" {
			t.Errorf("proxy: %s %s, want CONNECT %s:443", r.Method, r.Host, host)
			http.Error(w, "not the STS host", http.StatusForbidden)
			return
		}
		mu.Lock()
		if stopping {
			mu.Unlock()
			http.Error(w, "the test has ended", http.StatusServiceUnavailable)
			return
		}
		tunnels.Add(2)
		mu.Unlock()
		back, err := net.Dial("tcp", front.Listener.Addr().String())
		if err != nil {
			tunnels.Add(-2)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			tunnels.Add(-2)
			back.Close()
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		pipe := func(dst, src net.Conn) {
			defer tunnels.Done()
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(back, conn)
		go pipe(conn, back)
	}))
	t.Cleanup(func() {
		mu.Lock()
		stopping = true
		mu.Unlock()
		proxy.Close()
		tunnels.Wait() // the plugin has exited: its connection is closed
	})

	bundle := filepath.Join(t.TempDir(), "sts-ca.pem")
	if err := os.WriteFile(bundle, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return []clientcmdapi.ExecEnvVar{
		{Name: "HTTPS_PROXY", Value: proxy.URL},
		{Name: "NO_PROXY", Value: ""},
		{Name: "AWS_CA_BUNDLE", Value: bundle},
	}
}

// hostCertificate makes a CA and a certificate it signs for host, and
// returns the CA in PEM and the certificate with its key.
func hostCertificate(t *testing.T, host string) ([]byte, tls.Certificate) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := newKey(), newKey()
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sts-proxy-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
}
