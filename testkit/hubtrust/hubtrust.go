// Package hubtrust checks a token the way a cloud's STS checks one from an
// OIDC identity provider it trusts (an IAM OIDC provider, a workload
// identity pool provider, an Entra federated credential): the issuer's
// discovery document and keys fetched over TLS verified with its CA, then
// the token's signature, issuer, audience, expiry and subject. The cloud
// modules' stand-ins call it before they exchange a hub's token, so that
// their tests fail on a token no cloud would take.
//
// # A hub
//
// StartHub starts a real kube-apiserver (testcluster, with its issuer
// discovery served to anonymous callers) with a ServiceAccount whose tokens
// a Trust takes: what a cloud module's federation test mints with.
package hubtrust

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Trust is what a cloud knows of the identity provider it trusts.
type Trust struct {
	// Issuer is the iss tokens must carry; its discovery document is at
	// Issuer + "/.well-known/openid-configuration".
	Issuer string
	// CAData is the CA (PEM) of the issuer's serving certificate.
	CAData []byte
	// Audience is the audience tokens must carry.
	Audience string
	// Subject, when set, is the sub tokens must carry (a role's trust
	// policy on :sub, a federated credential's subject).
	Subject string
	// Now is the cloud's clock. Default: time.Now.
	Now func() time.Time
}

// Claims are what a checked token says.
type Claims struct {
	Issuer, Subject string
	Audience        []string
	Expiry          time.Time
	KeyID           string
}

// Check fetches the issuer's keys and checks token against them and t: it
// returns the token's claims, or an error that says which check failed
// (none quotes the token).
func (t Trust) Check(ctx context.Context, token string) (Claims, error) {
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.PS256})
	if err != nil {
		return Claims{}, fmt.Errorf("not a signed JWT: %v", err)
	}
	keys, err := t.keys(ctx)
	if err != nil {
		return Claims{}, err
	}
	kid := parsed.Headers[0].KeyID
	found := keys.Key(kid)
	if len(found) == 0 {
		return Claims{}, fmt.Errorf("signed with key %q, which the issuer's JWKS does not hold", kid)
	}
	var claims jwt.Claims
	if err := parsed.Claims(found[0].Key, &claims); err != nil {
		return Claims{}, fmt.Errorf("the signature does not verify with the issuer's key %q: %v", kid, err)
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	switch {
	case claims.Issuer != t.Issuer:
		return Claims{}, fmt.Errorf("issuer %q, want %q", claims.Issuer, t.Issuer)
	case !slices.Contains([]string(claims.Audience), t.Audience):
		return Claims{}, fmt.Errorf("audience %q, want %q", strings.Join(claims.Audience, ","), t.Audience)
	case claims.Expiry == nil:
		return Claims{}, errors.New("no exp")
	case !now().Before(claims.Expiry.Time()):
		return Claims{}, fmt.Errorf("expired at %s", claims.Expiry.Time().UTC().Format(time.RFC3339))
	case claims.NotBefore != nil && now().Before(claims.NotBefore.Time()):
		return Claims{}, fmt.Errorf("not valid before %s", claims.NotBefore.Time().UTC().Format(time.RFC3339))
	case t.Subject != "" && claims.Subject != t.Subject:
		return Claims{}, fmt.Errorf("subject %q, want %q", claims.Subject, t.Subject)
	}
	return Claims{Issuer: claims.Issuer, Subject: claims.Subject, Audience: claims.Audience, Expiry: claims.Expiry.Time(), KeyID: kid}, nil
}

// keys fetches the issuer's discovery document, then its JWKS.
func (t Trust) keys(ctx context.Context) (*jose.JSONWebKeySet, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(t.CAData) {
		return nil, errors.New("Trust.CAData holds no PEM certificate")
	}
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		Timeout:   30 * time.Second,
	}
	defer client.CloseIdleConnections()
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := getJSON(ctx, client, strings.TrimSuffix(t.Issuer, "/")+"/.well-known/openid-configuration", &discovery); err != nil {
		return nil, err
	}
	if discovery.Issuer != t.Issuer {
		return nil, fmt.Errorf("the discovery document names issuer %q, want %q", discovery.Issuer, t.Issuer)
	}
	var keys jose.JSONWebKeySet
	if err := getJSON(ctx, client, discovery.JWKSURI, &keys); err != nil {
		return nil, err
	}
	return &keys, nil
}

func getJSON(ctx context.Context, client *http.Client, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("fetching the issuer's %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the issuer's %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the issuer's %s answered %s", url, resp.Status)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("the issuer's %s: %w", url, err)
	}
	return nil
}
