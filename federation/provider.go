package federation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
	"k8s.io/client-go/rest"
)

// Provider turns a token the hub minted into the credential a member
// takes. Generic presents it as it is; the cloud modules exchange it at
// their cloud's STS. Credential may be called again while a credential it
// returned is in use, never concurrently for one member.
type Provider interface {
	Credential(ctx context.Context, token Token, member Member) (*login.ConnectionInfo, error)
}

// ProviderFunc is a function that is a Provider.
type ProviderFunc func(ctx context.Context, token Token, member Member) (*login.ConnectionInfo, error)

// Credential calls f.
func (f ProviderFunc) Credential(ctx context.Context, token Token, member Member) (*login.ConnectionInfo, error) {
	return f(ctx, token, member)
}

// Member is where a member's credential goes: its API server's address and
// the CA its serving certificate is verified with. Nothing else reaches the
// token: no proxy of the member's own (the process's HTTPS_PROXY applies,
// as to every client), no skipped verification.
type Member struct {
	// Server is the member's API server: an https URL.
	Server string
	// CAData is the CA (PEM) of its serving certificate; CAPath a file
	// that holds it. Neither: the system's roots.
	CAData []byte
	CAPath string
	// TLSServerName is the name its certificate is verified against, when
	// it is not Server's host.
	TLSServerName string
}

// check says what is wrong with m, a token's destination.
// It also builds the TLS settings, so that a CA that is no PEM, or a
// CAPath that is a directory, is found before a token is minted.
func (m Member) check() error {
	u, err := url.Parse(m.Server)
	shown := redact.Value(m.Server)
	if len(shown) > maxShown {
		shown = shown[:maxShown] + "…" // the server may come from someone else's object
	}
	switch {
	case m.Server == "":
		return errors.New("Member.Server is empty: the member's API server is required")
	case err != nil:
		return fmt.Errorf("Member.Server %q is not a URL", shown)
	case u.User != nil:
		return fmt.Errorf("Member.Server %s holds user info: a token goes to an address alone", shown)
	case u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("Member.Server %s is not an https URL with a host: a token goes only over verified TLS", shown)
	case strings.ContainsAny(m.Server, "?#"):
		// The token is shown at Server + "/version": a query or a
		// fragment would move that check off the path.
		return fmt.Errorf("Member.Server %s holds a query or a fragment: it is an API server's address, with a path at most", shown)
	}
	if _, err := rest.TLSConfigFor(m.restConfig()); err != nil {
		return fmt.Errorf("the member's TLS settings (Member.CAData, CAPath, TLSServerName): %w", redact.Error(err))
	}
	return nil
}

// maxShown bounds the bytes an error shows of Member.Server.
const maxShown = 256

// restConfig reaches the member, with no credential.
func (m Member) restConfig() *rest.Config {
	return &rest.Config{Host: m.Server, Timeout: showTimeout,
		TLSClientConfig: rest.TLSClientConfig{CAData: m.CAData, CAFile: m.CAPath, ServerName: m.TLSServerName}}
}

// showTimeout bounds the check of a new token on the member: a member that
// takes the connection and never answers does not hold the login.
var showTimeout = 30 * time.Second

// connection is m with no credential.
func (m Member) connection() login.ConnectionInfo {
	return login.ConnectionInfo{Server: m.Server, CAData: m.CAData, CAPath: m.CAPath, TLSServerName: m.TLSServerName}
}

// ErrRejected is what a Provider's error matches when the member, or its
// cloud's STS, rejected the hub's token: it does not trust the hub's
// issuer for the audience, or not the key that signed it, or cannot reach
// the hub's keys.
var ErrRejected = errors.New("federation: the member rejected the hub's token")

// Generic presents the hub's token to the member as it is: the member's
// API server trusts the hub's ServiceAccount issuer (a jwt authenticator
// of its AuthenticationConfiguration whose audiences are the token's). It
// shows each new token to the member once (a GET of /version, which any
// authenticated user may read) before it gives it: one the member rejects
// never reaches the vault, which serves the token in hand meanwhile.
// Config.Provider's default is Generic's function, whatever this variable
// holds.
var Generic Provider = genericProvider{}

// genericProvider is Generic's type: a login tells it from a cloud's, to
// say who refused a token.
type genericProvider struct{}

// Credential presents token to member as it is.
func (genericProvider) Credential(ctx context.Context, token Token, member Member) (*login.ConnectionInfo, error) {
	return generic(ctx, token, member)
}

func generic(ctx context.Context, token Token, member Member) (*login.ConnectionInfo, error) {
	if err := member.check(); err != nil {
		return nil, err
	}
	info := member.connection()
	info.Token = token.Value()
	info.Expiration = token.Expiration
	code, status, err := show(ctx, member.restConfig(), token.Value())
	if err != nil {
		return nil, fmt.Errorf("showing the token to the member: %w", err)
	}
	switch {
	case code == http.StatusUnauthorized:
		return nil, fmt.Errorf("%w (GET /version answered %s)", ErrRejected, status)
	case code/100 == 2, code == http.StatusForbidden, code == http.StatusNotFound:
		return &info, nil // an answer that comes after authentication
	}
	return nil, fmt.Errorf("showing the token to the member: GET /version answered %s (a redirect is not followed)", status)
}
