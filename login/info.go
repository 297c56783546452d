package login

import (
	"net/http"
	"time"
)

// ConnectionInfo is one credential for one API server, as a login handler
// returns it: where the server is, how to trust it, and how to prove who we are.
//
// Items that can come from a file or inline have a Path and a Data field;
// setting both is an error. Data fields take PEM, or PEM encoded in base64 as
// kubeconfig files carry it. Basic auth (Username, Password) and a token are
// mutually exclusive; a client certificate may accompany either.
//
// The vault treats a ConnectionInfo it has accepted as read-only: a handler
// must return a new value for every login and not modify it afterwards.
//
// Printing a ConnectionInfo in any way (fmt verbs, JSON, logr) shows the
// secret fields only as a short fingerprint, never their value.
type ConnectionInfo struct {
	// Server is the API server's absolute URL (https or http), optionally
	// with a path prefix for servers behind a proxy (https://host/k8s/clusters/c-1).
	Server string `json:"server"`

	// CAPath or CAData is the certificate authority that signs the server's
	// certificate. Neither: the system's roots.
	CAPath string `json:"caPath,omitempty"`
	CAData []byte `json:"caData,omitempty"`

	// Insecure turns TLS verification of the server off. Only for tests.
	Insecure bool `json:"insecure,omitempty"`

	// TLSServerName is the name to verify in the server's certificate when it
	// differs from the host of Server.
	TLSServerName string `json:"tlsServerName,omitempty"`

	// Username and Password are for HTTP basic authentication.
	Username string `json:"username,omitempty"`
	Password string `json:"-"`

	// Scheme and Token make the Authorization header "<Scheme> <Token>".
	// Scheme defaults to "Bearer"; a Scheme without a Token is sent alone.
	Scheme string `json:"scheme,omitempty"`
	Token  string `json:"-"`

	// CertificatePath/CertificateData and PrivateKeyPath/PrivateKeyData are
	// the TLS client certificate and its key; one needs the other.
	CertificatePath string `json:"certificatePath,omitempty"`
	CertificateData []byte `json:"certificateData,omitempty"`
	PrivateKeyPath  string `json:"privateKeyPath,omitempty"`
	PrivateKeyData  []byte `json:"-"`

	// ProxyURL is the proxy to reach Server through (http, https or socks5).
	// Empty: the proxy from the environment, as client-go does.
	ProxyURL string `json:"proxyURL,omitempty"`

	// DefaultNamespace is the namespace this identity works in by default
	// (the kubeconfig context's or the service account's namespace).
	DefaultNamespace string `json:"defaultNamespace,omitempty"`

	// Priority orders credentials: the vault hands out credentials of the
	// highest priority present, and lower ones only when none of those is left.
	Priority int `json:"priority,omitempty"`

	// Expiration is when the credential stops working. Zero: it works until
	// the server rejects it.
	Expiration time.Time `json:"expiration,omitzero"`

	// RefreshAfter asks the vault to call the handler again this long after
	// it returned this credential, while the credential serves: for a
	// handler that re-reads a source (a file, a store) that may change
	// before Expiration, or that has no expiration to give. It says nothing
	// of how long the credential works, and a refresh that gives the same
	// credential again keeps it (logged at V(1) only). The vault never asks
	// sooner than the handler's login floor (login.Backoff's initial delay,
	// 1 s by default), and still before Expiration. Zero or less: only
	// before Expiration.
	RefreshAfter time.Duration `json:"refreshAfter,omitempty"`

	// Transport, when set, is a round tripper that authenticates by itself
	// (client-go's transport for a kubeconfig auth provider, or a custom one).
	// The vault then only selects, routes and invalidates this credential, so
	// no token, basic auth or client certificate may be set beside it.
	Transport http.RoundTripper `json:"-"`
}
