package vault

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/tools/portforward"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// TestStreamFollowsCARotation: the server's certificate switches to a new
// CA, with new session ticket keys as after a restart (with the old keys,
// sessions verified before the switch resume past it, and nothing fails),
// and the handler now gives that CA. The first upgrade after the
// switch fails TLS verification, which invalidates the old credential as
// for ordinary requests; the handler runs again for the TLS failure, and
// the next upgrade trusts the new CA and streams. No restart, no relaxed
// verification.
func TestStreamFollowsCARotation(t *testing.T) {
	noGoroutineLeft(t)
	for _, e := range executorCases[:2] {
		t.Run(e.name, func(t *testing.T) {
			oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
			srv := newStreamServer(t, oldCA, nil)
			srv.allow("rotation-secret")
			h := newSwitchable(login.ConnectionInfo{Server: srv.URL(), CAData: oldCA.PEM, Token: "rotation-secret"})
			v, cfg := streamVault(t, h.login, login.Backoff(10*time.Millisecond, 100*time.Millisecond))
			mustExec(t, e.new(t, cfg, execTarget(cfg)))

			srv.rotateCA(t, newCA)
			h.set(login.ConnectionInfo{Server: srv.URL(), CAData: newCA.PEM, Token: "rotation-secret"})
			before := len(srv.seenHits(true))
			_, err := runExec(t, e.new(t, cfg, execTarget(cfg)))
			if err == nil {
				t.Fatal("exec trusting only the old CA succeeded against the new certificate")
			}
			if e.kind == webSocketUpgrade && !isUnknownAuthority(err) { // SPDY's executor keeps only the text
				t.Errorf("exec error = %v, want x509's unknown authority", err)
			}
			noSecretIn(t, err, "rotation-secret")
			// Callers get the TLS failure until the handler's backoff has
			// passed; then it logs in again.
			waitFor(t, "a credential with the new CA", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				c, err := v.Select(ctx)
				return err == nil && string(c.Info.CAData) == string(newCA.PEM)
			})
			if calls := h.calls(); len(calls) != 2 || calls[1] != login.TLSFailure {
				t.Errorf("handler called for %q, want the first login, then the TLS failure", calls)
			}

			mustExec(t, e.new(t, cfg, execTarget(cfg)))
			if got := srv.seenHits(true)[before:]; len(got) != 1 || got[0].Auth != bearer("rotation-secret") || got[0].Status != http.StatusSwitchingProtocols {
				t.Errorf("server saw upgrades %+v after the rotation, want one with the token (the failed one never got past TLS)", got)
			}
		})
	}
}

// lastHit is the server's latest request of the kind.
func lastHit(t *testing.T, srv *streamServer, upgradesOnly bool) hit {
	t.Helper()
	hits := srv.seenHits(upgradesOnly)
	if len(hits) == 0 {
		t.Fatal("server saw no request")
	}
	return hits[len(hits)-1]
}

// TestStreamTLSResumption: credentials of one TLS identity share a TLS
// session cache. After a token rotation, the new token's first upgrade and
// its first ordinary connection resume the old token's session (the server
// says DidResume). A credential with another client certificate shares
// nothing: its first handshake is a full one, and the server sees its own
// certificate, never the one a resumed session would carry.
func TestStreamTLSResumption(t *testing.T) {
	noGoroutineLeft(t)
	t.Run("token rotation", func(t *testing.T) {
		ca := testpki.NewCA(t)
		srv := newStreamServer(t, ca, nil)
		m := newMinter(srv, ca)
		v, cfg := streamVault(t, m.login, login.Backoff(10*time.Millisecond, time.Second))
		first := mustSelect(t, v)

		ordinaryRequest(t, cfg)
		if got := lastHit(t, srv, false); got.Resumed || got.Auth != bearer(first.Info.Token) {
			t.Fatalf("first request: server saw %+v, want a full handshake with the first token", got)
		}
		second := rotate(t, v, first)

		mustExec(t, newSPDYExecutor(t, cfg, execTarget(cfg)))
		if got := lastHit(t, srv, true); !got.Resumed || got.Auth != bearer(second.Info.Token) {
			t.Errorf("the new token's upgrade: server saw %+v, want the new token on a resumed session", got)
		}
		ordinaryRequest(t, cfg)
		if got := lastHit(t, srv, false); !got.Resumed || got.Auth != bearer(second.Info.Token) {
			t.Errorf("the new token's first connection: server saw %+v, want the new token on a resumed session", got)
		}
		mustExec(t, newWebSocketExecutor(t, cfg, execTarget(cfg)))
		if got := lastHit(t, srv, true); !got.Resumed || got.Kind != webSocketUpgrade {
			t.Errorf("WebSocket upgrade: server saw %+v, want a resumed session", got)
		}
	})

	t.Run("another client certificate", func(t *testing.T) {
		ca, clientCA := testpki.NewCA(t), testpki.NewCA(t)
		srv := newStreamServer(t, ca, clientCA)
		srv.allowCert("alice")
		srv.allowCert("bob")
		certA, keyA := clientCA.Issue(t, "alice", false)
		certB, keyB := clientCA.Issue(t, "bob", false)
		h := newSwitchable(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, CertificateData: certA, PrivateKeyData: keyA})
		v, cfg := streamVault(t, h.login, login.Backoff(10*time.Millisecond, time.Second))
		alice := mustSelect(t, v)

		ordinaryRequest(t, cfg)
		mustExec(t, newSPDYExecutor(t, cfg, execTarget(cfg)))
		if got := lastHit(t, srv, true); !got.Resumed || got.CertCN != "alice" {
			t.Fatalf("alice's upgrade: server saw %+v, want alice on a resumed session (same identity)", got)
		}

		h.set(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, CertificateData: certB, PrivateKeyData: keyB})
		rotate(t, v, alice)
		mustExec(t, newSPDYExecutor(t, cfg, execTarget(cfg)))
		if got := lastHit(t, srv, true); got.Resumed || got.CertCN != "bob" {
			t.Errorf("bob's first upgrade: server saw %+v, want bob on a full handshake", got)
		}
		ordinaryRequest(t, cfg)
		if got := lastHit(t, srv, false); got.CertCN != "bob" {
			t.Errorf("bob's ordinary request: server saw %+v, want bob", got)
		}
		if _, certs := srv.tlsSeen(); len(certs) == 0 || certs[len(certs)-1] != "bob" {
			t.Errorf("handshakes carried certificates %q, want bob's last", certs)
		}
	})
}

// TestStreamInsecureCredentialLeavesNothingBehind: one SPDY dialer serves
// an upgrade with a credential that skips verification, then one with a
// credential whose CA did not sign the server: the second fails
// verification. Nothing of the first credential's TLS settings stays in the
// round tripper's config.
func TestStreamInsecureCredentialLeavesNothingBehind(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newStreamServer(t, ca, nil)
	srv.allow("insecure-secret")
	srv.allow("verified-secret")
	h := newSwitchable(login.ConnectionInfo{Server: srv.URL(), Insecure: true, Token: "insecure-secret"})
	v, cfg := streamVault(t, h.login, login.Backoff(10*time.Millisecond, time.Second))
	insecure := mustSelect(t, v)
	d := forwardDialer(t, cfg, cfg.Host+portForwardPath)
	echo(t, dialForward(t, d), 0, "without verification")

	h.set(login.ConnectionInfo{Server: srv.URL(), CAData: testpki.NewCA(t).PEM, Token: "verified-secret"})
	rotate(t, v, insecure)
	conn, _, err := d.Dial(portforward.PortForwardProtocolV1Name)
	if err == nil {
		_ = conn.Close()
		t.Fatal("upgrade with a CA that did not sign the server succeeded")
	}
	noSecretIn(t, err, "verified-secret")
	// SPDY's dialer keeps only the error's text: the vault's verdict shows
	// it was TLS verification.
	waitFor(t, "the handler called for the TLS failure", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = v.Select(ctx) // logs in once the backoff has passed
		calls := h.calls()
		return calls[len(calls)-1] == login.TLSFailure
	})
	if hits := srv.seenHits(true); len(hits) != 1 || hits[0].Auth != bearer("insecure-secret") {
		t.Errorf("server saw upgrades %+v, want only the insecure credential's", hits)
	}
}

// TestStreamVerifiesTheCredentialsServerName: a credential's TLSServerName
// is the name an upgrade verifies the server's certificate for (the test
// server's is for "api" and loopback): with "api" exec works through each
// executor; with a name the certificate is not for, the upgrade fails TLS
// and the server sees no request.
func TestStreamVerifiesTheCredentialsServerName(t *testing.T) {
	noGoroutineLeft(t)
	for _, tc := range []struct {
		serverName string
		works      bool
	}{{"api", true}, {"not-the-api", false}} {
		t.Run(tc.serverName, func(t *testing.T) {
			ca := testpki.NewCA(t)
			srv := newStreamServer(t, ca, nil)
			srv.allow("name-secret")
			_, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, TLSServerName: tc.serverName, Token: "name-secret"}))
			for _, e := range executorCases[:2] {
				_, err := runExec(t, e.new(t, cfg, execTarget(cfg)))
				if tc.works && err != nil {
					t.Errorf("%s: exec error: %v", e.name, err)
				}
				if !tc.works && err == nil {
					t.Errorf("%s: exec succeeded with a server name the certificate is not for", e.name)
				}
				noSecretIn(t, err, "name-secret")
			}
			if hits := srv.seenHits(true); tc.works != (len(hits) == 2) {
				t.Errorf("server saw upgrades %+v, want two when the name is right, none otherwise", hits)
			}
		})
	}
}
