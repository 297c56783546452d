package eks_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"testing"

	"sigs.k8s.io/aws-iam-authenticator/pkg/token"

	"github.com/authvault/authvault/cloud/eks"
)

// A token passes aws-iam-authenticator's own verification (its token
// package's Verifier, as the EKS API server's webhook runs it), with the STS
// call it makes answered by the stand-in: the Verifier checks the host
// against the partition's STS hosts, so the URL is for the region's real
// host and the Verifier's HTTP client (http.DefaultTransport, which it does
// not let one replace) is routed to the stand-in for the test.
func TestAWSIAMAuthenticatorVerifies(t *testing.T) {
	s := newSTSStub(t)
	routeDefaultTransportTo(t, s)
	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.STSEndpoint = "" // https://sts.eu-west-1.amazonaws.com
	info, err := eks.Login(opts)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	id, err := token.NewVerifier(testCluster, "aws", testRegion).Verify(info.Token)
	if err != nil {
		t.Fatalf("aws-iam-authenticator refuses the token: %v", err)
	}
	if id.ARN != testUserARN || id.AccessKeyID != testKeyID || id.AccountID != testAccount {
		t.Errorf("got identity %+v, want %s with key %s", id, testUserARN, testKeyID)
	}
	if _, err := token.NewVerifier("other", "aws", testRegion).Verify(info.Token); err == nil {
		t.Error("aws-iam-authenticator for another cluster accepts the token")
	}
}

// routeDefaultTransportTo makes http.DefaultTransport dial the stand-in
// whatever the host, and trust its certificate (issued for example.com),
// until the test ends.
func routeDefaultTransportTo(t testing.TB, s *stsStub) {
	roots := x509.NewCertPool()
	roots.AddCert(s.srv.Certificate())
	addr := s.srv.Listener.Addr().String()
	rt := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "example.com"},
	}
	saved := http.DefaultTransport
	http.DefaultTransport = rt
	t.Cleanup(func() {
		http.DefaultTransport = saved
		rt.CloseIdleConnections()
	})
}
