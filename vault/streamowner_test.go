package vault

import (
	"crypto/tls"
	"net/http"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// A SPDY round tripper that dials with a TLS config of the caller's (here
// through UpgradeTransport, the caller's own http.Transport) is left as it
// is: the vault writes its credential's CA and client certificate only in a
// config spdy.RoundTripperFor made from the vault's config for that round
// tripper alone (its server name and nothing else), never in one that
// other connections use. A config of the caller's that is exactly that one
// cannot be told from it.
func TestStreamLeavesACallersTLSConfigAlone(t *testing.T) {
	noGoroutineLeft(t)
	ca, clientCA := testpki.NewCA(t), testpki.NewCA(t)
	srv := newStreamServer(t, ca, clientCA)
	certPEM, keyPEM := clientCA.Issue(t, "vault-user", false)
	srv.allowCert("vault-user")
	_, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, CertificateData: certPEM, PrivateKeyData: keyPEM}))

	// The caller's transport trusts a CA of its own, for its own hosts.
	callers := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: testpki.NewCA(t).Pool}
	own := &http.Transport{TLSClientConfig: callers}
	t.Cleanup(own.CloseIdleConnections)
	upgrader, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{UpgradeTransport: own})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, upgrader)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(upgradeRequest(t, execTarget(cfg), remotecommandV4))
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("upgrade through the caller's transport succeeded: it trusted the vault's CA")
	}
	if !isUnknownAuthority(err) {
		t.Errorf("upgrade error = %v, want the server's certificate unknown to the caller's config", err)
	}
	if callers.GetClientCertificate != nil || len(callers.Certificates) > 0 || callers.ClientSessionCache != nil || len(callers.NextProtos) > 0 {
		t.Errorf("the caller's TLS config was written: %+v", callers)
	}
	if _, certs := srv.tlsSeen(); len(certs) > 0 {
		t.Errorf("server saw client certificates %q, want none", certs)
	}
}

// A config copy that brings its own CA gets an upgrade with that CA and no
// vault credential: its TLS config is not the one the vault's config makes.
func TestStreamConfigWithItsOwnCAIsLeftAlone(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newStreamServer(t, ca, nil)
	srv.allow("vault-token")
	_, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "vault-token"}))
	mine := rest.CopyConfig(cfg)
	mine.CAData = ca.PEM

	_, err := runExec(t, newSPDYExecutor(t, mine, execTarget(mine)))
	if err == nil {
		t.Fatal("exec succeeded without a credential")
	}
	for _, h := range srv.seenHits(true) {
		if h.Auth != "" {
			t.Errorf("server saw an upgrade with %q, want no vault credential", h.Auth)
		}
	}
	if len(srv.seenHits(true)) == 0 {
		t.Error("server saw no upgrade: the config's own CA was not used")
	}
	noSecretIn(t, err, "vault-token")
}

// The session cache goes into a SPDY round tripper's TLS config only when
// the dial copies that config (an empty ServerName): a connection that kept
// the round tripper's config would store its later session tickets in
// whatever cache the next upgrade set there.
func TestSetUpgradeTLSSharesSessionsOnlyWhenTheDialCopies(t *testing.T) {
	cache := tls.NewLRUClientSessionCache(1)
	for _, tc := range []struct {
		serverName string
		want       tls.ClientSessionCache
	}{
		{"", cache},
		{"kubernetes.default", nil},
	} {
		dst := &tls.Config{ClientSessionCache: tls.NewLRUClientSessionCache(1)}
		setUpgradeTLS(dst, &tls.Config{ServerName: tc.serverName, ClientSessionCache: cache, NextProtos: []string{"http/1.1"}})
		if dst.ClientSessionCache != tc.want {
			t.Errorf("ServerName %q: session cache = %v, want %v", tc.serverName, dst.ClientSessionCache, tc.want)
		}
		if dst.ServerName != tc.serverName {
			t.Errorf("ServerName = %q, want %q", dst.ServerName, tc.serverName)
		}
	}
}
