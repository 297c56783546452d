//lint:file-ignore SA1019 apimachinery's httpstream, deprecated from v0.36, is what client-go's SPDY round tripper is in every supported release.

package vault

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	apispdy "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamspdy "k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// certAndTokenCredential is a credential with both a token and a client
// certificate (CN "vault-user") that srv accepts, so that a leak of either
// shows.
func certAndTokenCredential(t *testing.T, ca, clientCA *testpki.CA, token string, servers ...*streamServer) login.ConnectionInfo {
	t.Helper()
	for _, s := range servers {
		s.allow(token)
		s.allowCert("vault-user")
	}
	cert, key := clientCA.Issue(t, "vault-user", false)
	return login.ConnectionInfo{Server: servers[0].URL(), CAData: ca.PEM, Token: token, CertificateData: cert, PrivateKeyData: key}
}

// TestStreamRedirectCarriesNoCredential: the server answers a port-forward
// upgrade with a redirect to another host, which client-go's http.Client
// follows. The upgrade to that host carries neither the token nor the
// client certificate, even where that host would accept both: over https
// (a server with a certificate from the same CA, which the credential would
// trust), and over http.
func TestStreamRedirectCarriesNoCredential(t *testing.T) {
	noGoroutineLeft(t)
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"to https", true}, {"to http", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ca, clientCA := testpki.NewCA(t), testpki.NewCA(t)
			srv := newStreamServer(t, ca, clientCA)
			var other *streamServer
			if tc.tls {
				other = newStreamServer(t, ca, clientCA)
			} else {
				other = newPlainStreamServer(t)
			}
			info := certAndTokenCredential(t, ca, clientCA, "redirect-secret", srv, other)
			v, cfg := streamVault(t, handlerOf(info))
			cred := mustSelect(t, v)

			target := cfg.Host + redirectPath + "?to=" + url.QueryEscape(other.URL()+portForwardPath)
			conn, _, err := forwardDialer(t, cfg, target).Dial(portforward.PortForwardProtocolV1Name)
			if err == nil {
				_ = conn.Close()
				t.Fatal("Dial() succeeded on the other host")
			}
			noSecretIn(t, err, "redirect-secret")

			if got := srv.seenHits(true); len(got) != 1 || got[0].Status != http.StatusFound || got[0].Auth != bearer("redirect-secret") || got[0].CertCN != "vault-user" {
				t.Errorf("server saw %+v, want one upgrade with the credential, answered 302", got)
			}
			hellos, certs := other.tlsSeen()
			switch hits := other.seenHits(false); {
			case tc.tls && hellos == 0:
				t.Error("the other host saw no handshake: the redirect was not followed")
			case tc.tls && (len(hits) > 0 || len(certs) > 0):
				t.Errorf("the other host saw requests %+v and client certificates %q, want none: its CA is not the credential's to trust there", hits, certs)
			case !tc.tls && (len(hits) != 1 || hits[0].Kind != spdyUpgrade || hits[0].Auth != "" || hits[0].Status != http.StatusUnauthorized):
				t.Errorf("the other host saw %+v, want one upgrade without Authorization, answered 401", hits)
			}
			if got := mustSelect(t, v); got != cred {
				t.Errorf("credential %v was replaced: the other host's answer invalidated it", cred)
			}
		})
	}
}

// TestStreamPlainHTTPToHTTPSServerCarriesNoCredential: an upgrade sent
// over http:// to the host of an https credential goes out without the
// credential: what reaches the server's port in clear text holds no
// Authorization.
func TestStreamPlainHTTPToHTTPSServerCarriesNoCredential(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newStreamServer(t, ca, nil)
	srv.allow("cleartext-secret")
	v, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "cleartext-secret"}))
	cred := mustSelect(t, v)
	target := "http://" + strings.TrimPrefix(cfg.Host, "https://") + execPath + "?command=hostname&stdout=true"

	for _, e := range executorCases[:2] {
		_, err := runExec(t, e.new(t, cfg, target))
		if err == nil {
			t.Errorf("%s: exec over http to an https server succeeded", e.name)
		}
		noSecretIn(t, err, "cleartext-secret")
	}

	heads := srv.plainHeads()
	if len(heads) != 2 || !strings.HasPrefix(heads[0], "POST "+execPath) || !strings.HasPrefix(heads[1], "GET "+execPath) {
		t.Fatalf("server received in clear text %q, want the SPDY and WebSocket upgrades", heads)
	}
	for _, h := range heads {
		if strings.Contains(strings.ToLower(h), "authorization") || strings.Contains(h, "cleartext-secret") {
			t.Errorf("server received in clear text %q, want no credential", h)
		}
	}
	if got := mustSelect(t, v); got != cred {
		t.Errorf("credential %v was replaced, want it kept", cred)
	}
}

// TestStreamCredentialOverHTTP: a credential whose server says http://
// is sent over http, as for ordinary requests.
func TestStreamCredentialOverHTTP(t *testing.T) {
	noGoroutineLeft(t)
	srv := newPlainStreamServer(t)
	srv.allow("http-token")
	_, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), Token: "http-token"}))
	for _, e := range executorCases[:2] {
		mustExec(t, e.new(t, cfg, execTarget(cfg)))
	}
	for _, h := range srv.seenHits(true) {
		if h.Auth != bearer("http-token") || h.Status != http.StatusSwitchingProtocols {
			t.Errorf("server saw %+v, want the token, answered 101", h)
		}
	}
}

// TestStreamOwnAuthorizationSendsOnlyIt: a config copy with a bearer token
// of its own streams with that token only: neither the vault's token nor
// its client certificate goes along, and the server's 401 to it
// invalidates nothing and is not retried.
func TestStreamOwnAuthorizationSendsOnlyIt(t *testing.T) {
	noGoroutineLeft(t)
	ca, clientCA := testpki.NewCA(t), testpki.NewCA(t)
	srv := newStreamServer(t, ca, clientCA)
	v, cfg := streamVault(t, handlerOf(certAndTokenCredential(t, ca, clientCA, "vault-secret", srv)))
	cred := mustSelect(t, v)
	srv.allow("own-token")
	own := rest.CopyConfig(cfg)
	own.BearerToken = "own-token"

	for _, e := range executorCases[:2] {
		t.Run(e.name, func(t *testing.T) {
			before := len(srv.seenHits(true))
			mustExec(t, e.new(t, own, execTarget(own)))
			if got := srv.seenHits(true)[before:]; len(got) != 1 || got[0].Auth != bearer("own-token") || got[0].CertCN != "" {
				t.Errorf("server saw %+v, want one upgrade with the config's own token and no client certificate", got)
			}
		})
	}

	t.Run("rejected", func(t *testing.T) {
		srv.revoke("own-token")
		before := len(srv.seenHits(true))
		_, err := runExec(t, newSPDYExecutor(t, own, execTarget(own)))
		if err == nil {
			t.Fatal("exec with a revoked token of the config's own succeeded")
		}
		if got := srv.seenHits(true)[before:]; len(got) != 1 || got[0].Status != http.StatusUnauthorized {
			t.Errorf("server saw %+v, want one upgrade, answered 401: the vault retries only its own credentials", got)
		}
		if got := mustSelect(t, v); got != cred {
			t.Errorf("credential %v was invalidated by another token's 401", cred)
		}
		noSecretIn(t, err, "own-token", "vault-secret")
	})
}

// TestStreamOwnTransportCredential: a credential that authenticates
// through a Transport of its own (an auth provider's) cannot serve an
// upgrade, which dials by itself: the upgrade fails with
// ErrStreamOwnTransport, naming the handler and no secret, before any
// connection, while ordinary requests use that Transport.
func TestStreamOwnTransportCredential(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newStreamServer(t, ca, nil)
	srv.allow("provider-secret")
	provider := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(provider.CloseIdleConnections)
	authenticating := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", bearer("provider-secret"))
		return provider.RoundTrip(req)
	})
	v, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), Transport: authenticating}), login.ID("auth-provider"))
	cred := mustSelect(t, v)

	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(cfg.Host + "/version")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ordinary request = %v, %v; want 200 through the credential's Transport", resp, err)
	}
	_ = resp.Body.Close()
	hellos, _ := srv.tlsSeen()

	rt, _, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, spdyErr := rt.RoundTrip(upgradeRequest(t, execTarget(cfg), remotecommandV4))
	_, wsErr := runExec(t, newWebSocketExecutor(t, cfg, execTarget(cfg)))
	_, execErr := runExec(t, newSPDYExecutor(t, cfg, execTarget(cfg)))
	for name, err := range map[string]error{"SPDY round trip": spdyErr, "WebSocket exec": wsErr} {
		if !errors.Is(err, ErrStreamOwnTransport) {
			t.Errorf("%s error = %v, want ErrStreamOwnTransport", name, err)
		}
	}
	for _, err := range []error{spdyErr, wsErr, execErr} {
		if err == nil || !strings.Contains(err.Error(), `"auth-provider"`) {
			t.Errorf("error %v, want it to name the handler", err)
		}
		noSecretIn(t, err, "provider-secret")
	}
	if got, _ := srv.tlsSeen(); got != hellos || len(srv.seenHits(true)) > 0 {
		t.Errorf("server saw %d handshakes and upgrades %+v after the ordinary request, want none", got-hellos, srv.seenHits(true))
	}
	if got := mustSelect(t, v); got != cred {
		t.Errorf("credential %v was invalidated, want it kept for ordinary requests", cred)
	}
	client.CloseIdleConnections()
}

// TestStreamRoundTripperWithoutTLSConfig: a SPDY round tripper made without
// a TLS config, apimachinery's or k8s.io/streaming's, wrapped by the
// vault's config, fails the https upgrade with a clear error instead of
// dialing with the system's roots and no credential.
func TestStreamRoundTripperWithoutTLSConfig(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newStreamServer(t, ca, nil)
	srv.allow("no-tls-secret")
	_, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "no-tls-secret"}))

	for _, tc := range []struct {
		name string
		new  func() (http.RoundTripper, error)
	}{
		{"apimachinery", func() (http.RoundTripper, error) {
			return apispdy.NewRoundTripperWithConfig(apispdy.RoundTripperConfig{})
		}},
		{"k8s.io/streaming", func() (http.RoundTripper, error) {
			return streamspdy.NewRoundTripperWithConfig(streamspdy.RoundTripperConfig{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := tc.new()
			if err != nil {
				t.Fatal(err)
			}
			rt, err := rest.HTTPWrappersForConfig(cfg, inner)
			if err != nil {
				t.Fatal(err)
			}
			_, err = rt.RoundTrip(upgradeRequest(t, execTarget(cfg), remotecommandV4))
			if !errors.Is(err, errNoTLSConfig) {
				t.Errorf("RoundTrip() error = %v, want errNoTLSConfig", err)
			}
			noSecretIn(t, err, "no-tls-secret")
			if hellos, _ := srv.tlsSeen(); hellos != 0 {
				t.Errorf("server saw %d handshakes, want none: nothing is dialed", hellos)
			}
		})
	}
}
