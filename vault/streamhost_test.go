package vault

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/transport/websocket"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// TestStreamOpaqueURLCarriesNoCredential: an upgrade whose URL names the
// credential's server in Host but another host in Opaque goes where
// Opaque says (gorilla dials the host of URL.String(); a SPDY request line
// is the absolute URL, whose authority a server or a proxy in front of it
// takes over the Host header). It carries no credential, even where the
// other host has a certificate from the credential's CA and would take
// the token.
func TestStreamOpaqueURLCarriesNoCredential(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv, other := newStreamServer(t, ca, nil), newStreamServer(t, ca, nil)
	for _, s := range []*streamServer{srv, other} {
		s.allow("opaque-secret")
	}
	_, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "opaque-secret"}))
	opaque := func(t *testing.T) *http.Request {
		req := upgradeRequest(t, execTarget(cfg), remotecommandV4)
		req.URL = &url.URL{Scheme: "https", Host: req.URL.Host, Opaque: "//" + strings.TrimPrefix(other.URL(), "https://") + execPath}
		return req
	}

	for _, tc := range []struct {
		name string
		rt   func(t *testing.T) http.RoundTripper
	}{
		{"SPDY", func(t *testing.T) http.RoundTripper {
			rt, _, err := spdy.RoundTripperFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return rt
		}},
		{"WebSocket", func(t *testing.T) http.RoundTripper {
			rt, _, err := websocket.RoundTripperFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return rt
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := map[string]*streamServer{"the credential's server": srv, "the other host": other}
			before := map[string]int{}
			for name, s := range servers {
				before[name] = len(s.seenHits(true))
			}
			resp, err := tc.rt(t).RoundTrip(opaque(t))
			if err == nil {
				_ = resp.Body.Close()
			}
			noSecretIn(t, err, "opaque-secret")
			for name, s := range servers {
				for _, h := range s.seenHits(true)[before[name]:] {
					if h.Auth != "" {
						t.Errorf("%s saw an upgrade with %q, want no credential", name, h.Auth)
					}
				}
			}
		})
	}
}

// TestStreamConfigCopyWithAnotherHostCarriesNoCredential: a copy of the
// vault's config given the Host of another server streams there without
// the vault's token or client certificate, through each executor, even
// where that server has a certificate from the credential's CA and would
// take both.
func TestStreamConfigCopyWithAnotherHostCarriesNoCredential(t *testing.T) {
	noGoroutineLeft(t)
	ca, clientCA := testpki.NewCA(t), testpki.NewCA(t)
	srv, other := newStreamServer(t, ca, clientCA), newStreamServer(t, ca, clientCA)
	_, cfg := streamVault(t, handlerOf(certAndTokenCredential(t, ca, clientCA, "copy-secret", srv, other)))
	elsewhere := rest.CopyConfig(cfg)
	elsewhere.Host = other.URL()

	for _, e := range executorCases {
		_, err := runExec(t, e.new(t, elsewhere, execTarget(elsewhere)))
		if err == nil {
			t.Errorf("%s: exec on the other server succeeded", e.name)
		}
		noSecretIn(t, err, "copy-secret")
	}
	hellos, certs := other.tlsSeen()
	if hellos == 0 {
		t.Error("the other server saw no handshake: the copy's Host was not used")
	}
	if hits := other.seenHits(true); len(hits) > 0 || len(certs) > 0 {
		t.Errorf("the other server saw upgrades %+v and client certificates %q, want none", hits, certs)
	}
	if hits := srv.seenHits(true); len(hits) > 0 {
		t.Errorf("the credential's server saw upgrades %+v, want none", hits)
	}
}
