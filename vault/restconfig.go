package vault

import (
	"context"
	"errors"
	"net/url"

	"k8s.io/client-go/rest"
)

// RESTConfig waits for the first login (within ctx and Options.MaxWait, as
// Select does) and returns a client-go config whose every request goes
// through the vault: its Host is the first credential's server and its
// Transport is the vault's, with no CA, certificate or auth fields of its
// own (client-go refuses those beside a Transport).
//
// A first login that gives no credential does not fail it: an operator
// whose kubeconfig is missing or whose plugin fails at start stays up,
// its readiness check (Ready) says why, and the vault logs in again by
// itself. The config's Host is then PendingServer, a name that resolves
// nowhere, and the transport sends its requests to the server of the
// credential that serves once one arrives (a request that brings its own
// Authorization too, without the credential); until then they get the
// vault's LoginError, as any request that finds no credential does.
// RESTConfig fails only when ctx ends first (a LoginError wrapping its
// cause), the vault is closed (ErrClosed), or it has no handler at all
// (ErrNoHandlers: NoFallback and none registered).
//
// Use it for client-go clientsets, controller-runtime clients and managers
// (leader election included, which copies it). Settings made on it that do
// not authenticate — user agent, impersonation, QPS, burst, timeout, content
// type — work as usual.
//
// # Streams
//
// exec, attach and port-forward work on it unchanged:
// remotecommand.NewSPDYExecutor, NewWebSocketExecutor and
// NewFallbackExecutor, spdy.RoundTripperFor with spdy.NewDialer, and
// portforward's WebSocket and fallback dialers. Those dial by themselves
// and never use Transport; its WrapTransport hands each upgrade the vault's
// current credential (token, basic auth or client certificate), that
// credential's CA, server name and proxy, and its server; a 401 on the
// upgrade invalidates the credential and the upgrade is sent again with the
// next one, through at most one login, as an ordinary request. A stream opened after a rotation uses the new credential;
// one already open keeps the connection it has. What a server answers to
// an upgrade it refuses reaches the caller (client-go's error) with the
// credential's token and password masked.
//
// What cannot go through the vault, and what to do instead:
//
//   - Code that builds its own transport from the config's TLS fields
//     (rest.TLSConfigFor, transport.TLSConfigFor, an http.Transport of its
//     own) gets no CA and no credential: use rest.HTTPClientFor or
//     rest.TransportFor on the config, or Transport.
//   - rest.AnonymousClientConfig drops Transport and WrapTransport, as it
//     drops every credential: its requests are anonymous and trust the
//     system's roots.
//   - Setting WrapTransport outright replaces the vault's and ends streams
//     (ordinary requests still work): add a wrapper with cfg.Wrap instead.
//     Setting Proxy sends streams through that proxy instead of the
//     credential's.
//   - A credential with its own Transport (login.ConnectionInfo.Transport)
//     cannot carry an upgrade: the upgrade fails with ErrStreamOwnTransport.
//   - A streaming round tripper serves one upgrade at a time, as client-go
//     makes them: one built per executor or dialer, as client-go's
//     constructors do.
func (v *Vault) RESTConfig(ctx context.Context) (*rest.Config, error) {
	server := PendingServer
	cred, err := v.Select(ctx)
	switch {
	case err == nil:
		server = cred.Info.Server
	case ctx.Err() != nil, errors.Is(err, ErrClosed), errors.Is(err, ErrNoHandlers):
		return nil, err // no login is coming
	default: // the login goes on: requests to PendingServer wait for it
		v.mu.Lock()
		v.addBaseLocked(pendingBase)
		v.mu.Unlock()
	}
	name := serverName(server)
	return &rest.Config{
		Host:          server,
		Transport:     v.Transport(),
		WrapTransport: v.streamWrapper(name),
		Proxy:         streamProxy,
		// A TLS field that client-go accepts beside a Transport, so that
		// spdy.RoundTripperFor makes a TLS config the vault fills in for
		// each upgrade. The server's own name changes nothing for a copy
		// that builds its own transport (rest.AnonymousClientConfig's):
		// TLS names the server by its host anyway. NextProtos would not
		// do: a copy would offer HTTP/2 on connections that speak only
		// HTTP/1.1 (an upgrade, DISABLE_HTTP2).
		TLSClientConfig: rest.TLSClientConfig{ServerName: name},
	}, nil
}

// PendingServer is the Host of a config that RESTConfig returned before the
// vault had any credential: a name of the reserved .invalid domain, so that
// a request that leaves the vault's transport (a transport built from the
// config's TLS fields) goes nowhere. The transport routes it to the server
// of the credential it sends.
const PendingServer = "https://authvault.invalid"

var pendingBase = base{scheme: "https", host: "authvault.invalid"}

// serverName is the host of the server URL s, without its port: the name
// TLS verifies by default.
func serverName(s string) string {
	u, err := url.Parse(s)
	if err != nil { // a credential's Server parsed when it arrived
		return ""
	}
	return u.Hostname()
}

// DefaultNamespace is what Namespace returns when no credential names one,
// as for kubeconfig contexts.
const DefaultNamespace = "default"

// Namespace is the DefaultNamespace of the credentials the vault hands out
// now: the first one of the highest priority that names one, else "default".
func (v *Vault) Namespace() string {
	s := v.snap.Load()
	if s.held {
		return DefaultNamespace
	}
	for _, group := range s.groups {
		for _, c := range group {
			if c.Info.DefaultNamespace != "" {
				return c.Info.DefaultNamespace
			}
		}
	}
	return DefaultNamespace
}
