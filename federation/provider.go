package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

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
// token: no proxy, no skipped verification.
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
func (m Member) check() error {
	u, err := url.Parse(m.Server)
	switch {
	case m.Server == "":
		return errors.New("the member has no Server")
	case err != nil:
		return fmt.Errorf("the member's Server is not a URL: %w", err)
	case u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("the member's Server %s is not an https URL with a host: a token goes only over verified TLS", u.Redacted())
	case u.User != nil:
		return fmt.Errorf("the member's Server %s holds user info: a token goes to an address alone", u.Redacted())
	}
	return nil
}

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
var Generic Provider = ProviderFunc(generic)

func generic(ctx context.Context, token Token, member Member) (*login.ConnectionInfo, error) {
	info := member.connection()
	info.Token = token.Value()
	info.Expiration = token.Expiration
	cfg := &rest.Config{Host: member.Server, BearerToken: token.Value(),
		TLSClientConfig: rest.TLSClientConfig{CAData: member.CAData, CAFile: member.CAPath, ServerName: member.TLSServerName}}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the member's TLS settings: %w", redact.Error(err))
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(member.Server, "/")+"/version", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("showing the token to the member: %w", redact.Error(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("%w: GET /version with it answered %s", ErrRejected, resp.Status)
	case resp.StatusCode/100 == 2, resp.StatusCode == http.StatusForbidden, resp.StatusCode == http.StatusNotFound:
		return &info, nil // an answer that comes after authentication
	}
	return nil, fmt.Errorf("showing the token to the member: GET /version answered %s (a redirect is not followed)", resp.Status)
}
