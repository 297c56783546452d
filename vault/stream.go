//lint:file-ignore SA1019 apimachinery's httpstream, deprecated from client-go v0.36 in favour of k8s.io/streaming, is what spdy.RoundTripperFor returns in every release this module supports (v0.35 has nothing else).

package vault

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/transport/websocket"
	streamhttp "k8s.io/streaming/pkg/httpstream"

	"github.com/authvault/authvault/redact"
)

// ErrStreamOwnTransport is why an upgrade fails when the credential selected
// for it authenticates through a Transport of its own (an auth provider or
// a client-go round tripper a piggyback handler kept): an upgrade dials by
// itself and cannot go through such a round tripper.
var ErrStreamOwnTransport = errors.New("vault: the credential authenticates through its own Transport, which an exec, attach or port-forward upgrade cannot use")

// errNoTLSConfig is why an https upgrade fails when its round tripper has no
// TLS config the vault can fill in.
var errNoTLSConfig = errors.New("vault: the upgrade round tripper has no TLS config to set the credential's in: build it with spdy.RoundTripperFor or websocket.RoundTripperFor from the vault's RESTConfig, whose TLSClientConfig.ServerName makes client-go create one")

// streamWrapper returns RESTConfig's WrapTransport for a config whose
// TLSClientConfig.ServerName is serverName. client-go's streaming round
// trippers (spdy.RoundTripperFor, behind NewSPDYExecutor and port-forward;
// websocket.RoundTripperFor, behind NewWebSocketExecutor) never use the
// config's Transport: they dial by themselves with a TLS config built from
// its TLS fields. They do pass through WrapTransport, innermost of all the
// wrappers; there the vault takes each upgrade over. An ordinary client's
// round tripper is the vault's Transport itself, returned as it is, so
// ordinary requests pay nothing; anything else the vault does not know is
// returned as it is too.
func (v *Vault) streamWrapper(serverName string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		switch inner := rt.(type) {
		case *roundTripper:
			return rt
		case *websocket.RoundTripper:
			// Its TLS config is a field: each upgrade gets a config of
			// its own, and the one the caller gave is never written.
			return &upgrader{v: v, inner: inner, setTLS: func(c *tls.Config) error {
				inner.TLSConfig = c
				return nil
			}}
		case spdyUpgrader:
			return v.spdyWrapper(inner, serverName)
		case streamingSPDYUpgrader:
			return v.spdyWrapper(inner, serverName)
		}
		return rt
	}
}

// spdyWrapper takes over rt's upgrades when the TLS config rt dials with is
// the one spdy.RoundTripperFor made from the vault's config: the server
// name and TLS 1.2 as the least version, nothing else. Only that one is the
// round tripper's own to write the credential's settings in; one built
// otherwise (from a transport of the caller's, through UpgradeTransport, or
// a config shared with other connections) would carry the vault's CA and
// client certificate wherever its other users go, so such a round tripper
// is left as it is, without the vault's credentials. (A config of the
// caller's that holds exactly the server name and nothing else cannot be
// told from client-go's.)
func (v *Vault) spdyWrapper(rt tlsHolder, serverName string) http.RoundTripper {
	own := rt.TLSClientConfig()
	switch {
	case own == nil:
		return &upgrader{v: v, inner: rt, setTLS: func(*tls.Config) error { return errNoTLSConfig }}
	case !madeFromRESTConfig(own, serverName):
		return rt
	}
	return &upgrader{v: v, inner: rt, setTLS: func(c *tls.Config) error {
		if rt.TLSClientConfig() != own {
			return errNoTLSConfig
		}
		setUpgradeTLS(own, c)
		return nil
	}}
}

// madeFromRESTConfig tells whether c is what client-go's TLS setup makes
// from the vault's config: its server name, and no CA, certificate,
// verification hook, protocol or session cache of anyone's.
func madeFromRESTConfig(c *tls.Config, serverName string) bool {
	return c.ServerName == serverName && c.RootCAs == nil && len(c.Certificates) == 0 &&
		c.GetClientCertificate == nil && c.GetCertificate == nil && !c.InsecureSkipVerify &&
		c.VerifyPeerCertificate == nil && c.VerifyConnection == nil && len(c.NextProtos) == 0 &&
		c.ClientSessionCache == nil && c.KeyLogWriter == nil
}

// tlsHolder is a round tripper that keeps the TLS config it dials with,
// which only it holds, behind a getter.
type tlsHolder interface {
	http.RoundTripper
	TLSClientConfig() *tls.Config
}

// spdyUpgrader is the SPDY round tripper of spdy.RoundTripperFor
// (apimachinery's).
type spdyUpgrader interface {
	httpstream.UpgradeRoundTripper
	TLSClientConfig() *tls.Config
}

// streamingSPDYUpgrader is the SPDY round tripper of k8s.io/streaming,
// which apimachinery's wraps and its deprecation notice sends callers to:
// a caller that builds it directly gets the same service.
type streamingSPDYUpgrader interface {
	streamhttp.UpgradeRoundTripper
	TLSClientConfig() *tls.Config
}

// upgrader sends the upgrade requests of one streaming round tripper with the
// vault's credentials. Like the round tripper it wraps, it serves one
// upgrade at a time.
type upgrader struct {
	v      *Vault
	inner  http.RoundTripper
	setTLS func(*tls.Config) error
}

// RoundTrip selects a credential, routes and authenticates req as the
// vault's Transport does, gives the inner round tripper the TLS settings of
// the credential's identity (CA, client certificate, server name, proxy) and
// sends the upgrade. A 401 invalidates the credential and the upgrade goes
// again with the next one, through at most one login, as an ordinary
// request does (an upgrade has no body to replay): two credentials that
// both fail at once (a revoked plugin token, a token file's token past its
// life) must not fail an exec that the login after them serves.
func (u *upgrader) RoundTrip(req *http.Request) (*http.Response, error) {
	v := u.v
	ownAuth := hasAuthorization(req.Header)
	relogged := false
	for attempt := 1; ; attempt++ {
		cred, err := v.Select(req.Context())
		if err != nil {
			closeBody(req)
			return nil, err
		}
		out, via, carriesCred := v.prepare(req, cred, ownAuth)
		t, ok := via.(*pooled)
		if !ok {
			closeBody(req)
			if _, closed := via.(closedTransport); closed {
				return nil, ErrClosed
			}
			return nil, fmt.Errorf("vault: upgrade with handler %q's credential: %w", cred.Handler, ErrStreamOwnTransport)
		}
		// The websocket round tripper rewrites the URL's scheme in place;
		// the next attempt starts from the caller's.
		target := *out.URL
		out.URL = &target
		if out.URL.Scheme == "https" {
			if err := u.setTLS(t.upgradeTLS()); err != nil {
				closeBody(req)
				return nil, err
			}
		}
		out = out.WithContext(context.WithValue(out.Context(), upgradeVia{}, t))

		resp, err := u.inner.RoundTrip(out)
		status := upgradeStatus(resp, err)
		switch {
		case carriesCred && (err != nil || status != http.StatusSwitchingProtocols):
			// A refusal may quote the credential back (a gateway's
			// "token … is revoked"), in WebSocket's error or in the SPDY
			// answer's body, which client-go puts in its error.
			secrets := secretsOf(cred)
			err = redact.Secrets(err, secrets...)
			if resp != nil && resp.Body != nil {
				resp.Body = &maskedBody{body: resp.Body, secrets: secrets}
			}
		case err != nil:
			// client-go's SPDY dialer quotes a refusing proxy's URL with
			// its user name; errors.Is and errors.As still see through.
			err = redact.Error(err)
		}
		switch {
		case !carriesCred:
			return resp, err
		case err != nil && isTLSFailure(err):
			v.invalidate(req.Context(), cred, &TLSError{Server: cred.Info.Server, Err: err}, byTLSFailure)
			return resp, err
		case status == 0: // no answer from the server
			return resp, err
		case status != http.StatusUnauthorized:
			v.served(cred)
			return resp, err
		}
		if resp != nil {
			v.invalidate(req.Context(), cred, unauthorized(cred, resp), by401)
		} else {
			v.invalidate(req.Context(), cred, &UnauthorizedError{
				Server: cred.Info.Server, Status: "401 Unauthorized", StatusCode: http.StatusUnauthorized,
			}, by401)
		}
		// The next Select logs in when no credential is left; one login
		// per upgrade at most.
		needsLogin := v.snap.Load().pick() == nil
		if attempt >= maxAttempts || (needsLogin && relogged) {
			return resp, err
		}
		relogged = relogged || needsLogin
		// The refused answer (SPDY's; WebSocket's is an error) is left
		// unread: its connection serves no retry, and its body comes
		// from a bare connection without deadline, where reading it, or
		// closing it, which reads it to its end, waits as long as the
		// server likes. The SPDY round tripper keeps that connection to
		// itself; its next RoundTrip replaces it, and the runtime closes
		// it once unreachable, as after any refused upgrade.
		v.metrics.retries.Inc()
	}
}

// upgradeStatus is the HTTP status the server answered an upgrade with: the
// response's, or for a websocket round tripper, which turns any answer but
// 101 into an error, the one that error carries. 0: no answer.
func upgradeStatus(resp *http.Response, err error) int {
	if resp != nil {
		return resp.StatusCode
	}
	// The error is k8s.io/streaming's from client-go v0.36, and
	// apimachinery's before.
	var cause error
	var failure *streamhttp.UpgradeFailureError
	var failureBefore036 *httpstream.UpgradeFailureError
	switch {
	case errors.As(err, &failure):
		cause = failure.Cause
	case errors.As(err, &failureBefore036):
		cause = failureBefore036.Cause
	}
	if cause == nil {
		return 0
	}
	var status apierrors.APIStatus
	if errors.As(cause, &status) {
		return int(status.Status().Code)
	}
	// client-go adds the response's status line to gorilla's handshake
	// error when the body is no Status object.
	text := cause.Error()
	if i := strings.Index(text, "bad handshake ("); i >= 0 {
		var code int
		if _, scanErr := fmt.Sscanf(text[i+len("bad handshake ("):], "%d", &code); scanErr == nil {
			return code
		}
	}
	return http.StatusBadRequest // an answer, not a 401
}

// upgradeVia is the context key of the pooled transport whose identity an
// upgrade uses, for streamProxy.
type upgradeVia struct{}

// streamProxy is RESTConfig's Proxy: the streaming round trippers dial by
// themselves, and ask it which proxy to dial through. For an upgrade the
// vault routes, that of the credential's identity; for any other request
// (a client built on a copy of the config without its Transport), the
// environment's, as client-go's default.
func streamProxy(req *http.Request) (*url.URL, error) {
	if t, ok := req.Context().Value(upgradeVia{}).(*pooled); ok && t.proxy != nil {
		return t.proxy, nil
	}
	return envProxy(req)
}

var envProxy = utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment)

// upgradeTLS is the TLS config of an upgrade over t's identity: its CA,
// client certificate, server name and session cache, and HTTP/1.1 only,
// since an upgrade is an HTTP/1.1 request.
func (t *pooled) upgradeTLS() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.tls != nil {
		c = t.tls.Clone()
	}
	c.NextProtos = []string{"http/1.1"}
	return c
}

// setUpgradeTLS sets in dst, the TLS config a SPDY round tripper dials
// with, the fields of src that client-go's TLS setup and the vault set.
// dst is the round tripper's own, made for it by spdy.RoundTripperFor.
//
// A connection dialed with dst keeps using it after its handshake, for the
// session tickets the server sends later, unless the dial copied it, which
// crypto/tls does when ServerName is empty. A round tripper used again while
// its first connection is open would have that connection store its
// tickets in the next upgrade's cache, another TLS identity's perhaps, so
// the session cache is set only when the dial will copy the config.
func setUpgradeTLS(dst, src *tls.Config) {
	dst.MinVersion = src.MinVersion
	dst.InsecureSkipVerify = src.InsecureSkipVerify
	dst.ServerName = src.ServerName
	dst.RootCAs = src.RootCAs
	dst.Certificates = src.Certificates
	dst.GetClientCertificate = src.GetClientCertificate
	dst.ClientSessionCache = nil
	if src.ServerName == "" {
		dst.ClientSessionCache = src.ClientSessionCache
	}
	dst.NextProtos = src.NextProtos
}
