package federation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// Config is how a member is reached with tokens the hub mints for one of
// its ServiceAccounts.
type Config struct {
	// Hub reaches the hub that mints the tokens (required): the config of
	// the hub's own vault. Its identity needs create on
	// serviceaccounts/token in Namespace.
	Hub *rest.Config
	// Namespace and ServiceAccount name the hub's ServiceAccount whose
	// tokens the member trusts (required).
	Namespace, ServiceAccount string
	// Audiences the tokens are minted for (required): those the member's
	// authenticator accepts. A token is never minted without one, nor for
	// an audience of the hub's own (its issuer, kubernetes.default.svc):
	// a member could replay it on the hub.
	Audiences []string
	// Lifetime each token is asked for. Default: an hour. At least ten
	// minutes, TokenRequest's floor, and at most a day. The vault mints
	// the next one before it expires.
	Lifetime time.Duration
	// Member is where the credential goes (required).
	Member Member
	// Provider turns the token into the member's credential. Default:
	// Generic, the token as it is.
	Provider Provider
}

// The bounds of Config.Lifetime.
const (
	defaultLifetime = time.Hour
	minLifetime     = 10 * time.Minute
	maxLifetime     = 24 * time.Hour
)

// hubAudiences are the audiences a hub's API server accepts by default,
// besides its issuer: a token for one of them is the hub's own.
var hubAudiences = []string{"https://kubernetes.default.svc", "https://kubernetes.default.svc.cluster.local", "kubernetes.default.svc"}

// Login returns a handler that mints a token for cfg's ServiceAccount on
// the hub (TokenRequest, with the member's audiences and cfg's lifetime)
// and gives cfg.Provider's credential for it. The vault refreshes it before
// the token expires, and mints again after the member rejects it.
//
// A token the member rejects (the provider says so: ErrRejected) is not
// given: the login fails for this round, the vault serves the token in
// hand while it lasts and tries again after its backoff, and the error
// says why: the member does not trust the hub's new key yet (the hub
// switched its signing key; an API server refetches an issuer's keys up
// to an hour after its last fetch), or it does not trust the hub's issuer
// for the audience, or cannot reach the hub's keys.
//
// The handler is named "federated <namespace>/<serviceaccount> for
// <audiences>"; its metric label is "federated".
func Login(cfg Config) login.Handler {
	// Copies: a caller that reuses its slices changes nothing here.
	cfg.Audiences = slices.Clone(cfg.Audiences)
	cfg.Member.CAData = slices.Clone(cfg.Member.CAData)
	f := &federated{cfg: cfg, now: time.Now}
	name := fmt.Sprintf("federated %s/%s for %s", cfg.Namespace, cfg.ServiceAccount, strings.Join(cfg.Audiences, ","))
	return login.Named(name, "federated", f.login)
}

// federated is a Login handler's state: the keys of its tokens, to tell a
// member that does not trust the hub's new key from one that rejects
// everything.
type federated struct {
	cfg Config
	now func() time.Time

	mu         sync.Mutex // guards the rest
	mint       login.Handler
	trustedKey string // the key of the last token the member took
	hubRefuses bool   // the hub refused a token of these audiences
}

// loginTimeout bounds a login: the mint and the provider's exchange.
const loginTimeout = time.Minute

// checkHubRefuses shows the first token to the hub itself (a GET of
// /version): one the hub takes is of an audience its API server accepts
// (--api-audiences, which may hold more than its issuer) and is never
// given, since the member could replay it there.
func (f *federated) checkHubRefuses(ctx context.Context, token Token) error {
	f.mu.Lock()
	checked := f.hubRefuses
	f.mu.Unlock()
	if checked {
		return nil
	}
	// The request brings its own Authorization and no other credential:
	// through a vault's transport (a request with its own Authorization
	// goes with the TLS settings of the vault's credential for the hub,
	// and no credential), or through an anonymous copy of a config of
	// client-go's own (its CA, no client certificate, which the hub would
	// take before the token).
	cfg := rest.AnonymousClientConfig(f.cfg.Hub)
	if f.cfg.Hub.Transport != nil {
		cfg = rest.CopyConfig(f.cfg.Hub)
	}
	code, status, err := show(ctx, cfg, token.Value())
	if err != nil {
		return fmt.Errorf("federation: checking that the hub refuses the member's token: %w", err)
	}
	if code != http.StatusUnauthorized {
		return login.Permanent(fmt.Errorf("federation: the hub takes a token for audience %s (GET /version answered %s): its API server accepts that audience, and a member could replay the token on the hub; give the member an audience of its own", strings.Join(f.cfg.Audiences, ","), status))
	}
	f.mu.Lock()
	f.hubRefuses = true
	f.mu.Unlock()
	return nil
}

func (f *federated) login(ctx context.Context) (*login.ConnectionInfo, error) {
	mint, err := f.setup()
	if err != nil {
		return nil, login.Permanent(err)
	}
	// A hub or member that never answers does not hold the login, whatever
	// timeout the handler was registered with.
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	minted, err := mint(ctx)
	if err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	token, err := f.token(minted)
	if err != nil {
		return nil, login.Permanent(redact.Secrets(err, minted.Token))
	}
	if err := f.checkHubRefuses(ctx, token); err != nil {
		return nil, err
	}
	provider := f.cfg.Provider
	if provider == nil {
		provider = genericProvider{}
	}
	info, err := provider.Credential(ctx, token, f.cfg.Member)
	err = redact.Secrets(err, token.Value()) // a provider's error may quote the token back
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case errors.Is(err, ErrRejected) && f.trustedKey != "" && token.KeyID != f.trustedKey:
		// Permanent for this login: the waiting callers get the reason
		// now, and the vault's backoff spaces the next tries, while it
		// serves the token in hand.
		return nil, login.Permanent(fmt.Errorf("%s rejected a token signed with the hub's key %q where tokens of its key %q served: %s: %w",
			f.refuser(), token.KeyID, f.trustedKey, f.newKeyAdvice(provider), err))
	case errors.Is(err, ErrRejected):
		return nil, login.Permanent(fmt.Errorf("%s rejected the hub's token for audience %s (serviceaccount %s/%s): %s: %w",
			f.refuser(), strings.Join(f.cfg.Audiences, ","), f.cfg.Namespace, f.cfg.ServiceAccount, f.trustAdvice(provider), err))
	case err != nil:
		return nil, fmt.Errorf("federation: member %s: %w", redact.Value(f.cfg.Member.Server), err)
	}
	f.trustedKey = token.KeyID
	return info, nil
}

// isGeneric tells whether p presents the token to the member itself;
// otherwise a cloud's token service exchanges it, and is what refuses it.
func isGeneric(p Provider) bool {
	_, ok := p.(genericProvider)
	return ok
}

// refuser names who refused a token: the member, or the exchange for it.
func (f *federated) refuser() string {
	if f.cfg.Provider == nil || isGeneric(f.cfg.Provider) {
		return "member " + redact.Value(f.cfg.Member.Server)
	}
	return "the exchange for member " + redact.Value(f.cfg.Member.Server) + " (the cloud's token service)"
}

// trustAdvice is what must hold for p's refuser to take the token.
func (f *federated) trustAdvice(p Provider) string {
	if isGeneric(p) {
		return "the member must trust the hub's issuer for that audience, and reach the hub's keys"
	}
	return "the cloud must trust the hub's issuer for that audience and the ServiceAccount's subject (its OIDC provider and the role's, pool's or application's trust), and reach the hub's keys"
}

// newKeyAdvice is what a refusal of a token of the hub's new key means
// for p's refuser.
func (f *federated) newKeyAdvice(p Provider) string {
	if isGeneric(p) {
		return "the member does not trust the hub's new key yet (an API server refetches an issuer's keys up to an hour after its last fetch; rewriting its authentication config reloads them)"
	}
	return "the cloud does not trust the hub's new key yet (it refetches an issuer's keys on its own schedule)"
}

// setup checks the config once and makes the hub's client.
func (f *federated) setup() (login.Handler, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mint != nil {
		return f.mint, nil
	}
	cfg := f.cfg
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	hub, err := kubernetes.NewForConfig(cfg.Hub)
	if err != nil {
		return nil, fmt.Errorf("federation: Config.Hub: %w", redact.Error(err))
	}
	f.mint = handlers.TokenRequest(handlers.TokenRequestConfig{
		Client: hub.CoreV1(), Namespace: cfg.Namespace, Name: cfg.ServiceAccount,
		Audiences: cfg.Audiences, ExpirationSeconds: int64(cfg.lifetime() / time.Second),
	})
	return f.mint, nil
}

// Check says what Login would refuse of cfg at its first login, before it
// mints a token: a required field missing, no audience or one of the hub's
// own, a Lifetime out of bounds, a Member.Server that is not an https URL
// of an address alone, member TLS settings that do not load (a CA that is
// no PEM). It is for callers that build a Config from an object someone
// else wrote (package fleet's watches), to refuse the object, by its name,
// before it serves.
func (cfg Config) Check() error {
	switch {
	case cfg.Hub == nil:
		return errors.New("federation: Config.Hub is required: the hub that mints the tokens")
	case cfg.Namespace == "" || cfg.ServiceAccount == "":
		return errors.New("federation: Config.Namespace and Config.ServiceAccount are required: the hub's ServiceAccount the member trusts")
	case len(cfg.Audiences) == 0:
		return errors.New("federation: Config.Audiences are required: a token without the member's audience would be the hub's own")
	case slices.Contains(cfg.Audiences, ""):
		return errors.New("federation: Config.Audiences holds an empty audience: a token without the member's audience would be the hub's own")
	}
	for _, aud := range cfg.Audiences {
		if slices.Contains(hubAudiences, aud) {
			return fmt.Errorf("federation: audience %q is the hub's own: a member could replay the token on the hub", aud)
		}
	}
	if lifetime := cfg.lifetime(); lifetime < minLifetime || lifetime > maxLifetime {
		return fmt.Errorf("federation: Config.Lifetime %v is out of [%v, %v]", lifetime, minLifetime, maxLifetime)
	}
	if err := cfg.Member.check(); err != nil {
		return fmt.Errorf("federation: %w", err)
	}
	return nil
}

// lifetime is cfg.Lifetime, or its default.
func (cfg Config) lifetime() time.Duration {
	if cfg.Lifetime == 0 {
		return defaultLifetime
	}
	return cfg.Lifetime
}

// token reads what the hub minted: its key and audiences, from the JWT's
// header and claims (unverified: the member verifies it; these only name
// the key in errors and refuse a token the hub itself would take).
func (f *federated) token(minted *login.ConnectionInfo) (Token, error) {
	sa := f.cfg.Namespace + "/" + f.cfg.ServiceAccount
	jws, err := jwt.ParseSigned(minted.Token, signingAlgorithms)
	if err != nil {
		return Token{}, fmt.Errorf("federation: the hub's token for serviceaccount %s is not a JWT: %w", sa, redact.Error(err))
	}
	var claims jwt.Claims
	if err := jws.UnsafeClaimsWithoutVerification(&claims); err != nil {
		return Token{}, fmt.Errorf("federation: the hub's token for serviceaccount %s has unreadable claims: %w", sa, redact.Error(err))
	}
	if len(claims.Audience) == 0 {
		return Token{}, fmt.Errorf("federation: the hub's token for serviceaccount %s has no audience: the hub would take it", sa)
	}
	for _, aud := range claims.Audience {
		switch {
		case aud == claims.Issuer:
			return Token{}, fmt.Errorf("federation: the hub's token for serviceaccount %s has audience %q, the hub's issuer: the hub would take it; give the member an audience of its own", sa, aud)
		case !slices.Contains(f.cfg.Audiences, aud):
			return Token{}, fmt.Errorf("federation: the hub's token for serviceaccount %s has audience %q, not one of %q: the hub would take it", sa, aud, f.cfg.Audiences)
		}
	}
	t := Token{value: &minted.Token, Expiration: minted.Expiration, Audiences: []string(claims.Audience)}
	if exp := claims.Expiry.Time(); claims.Expiry != nil && (t.Expiration.IsZero() || exp.Before(t.Expiration)) {
		t.Expiration = exp // the hub's answer said none, or a later one than the token holds
	}
	if len(jws.Headers) > 0 {
		t.KeyID = jws.Headers[0].KeyID
	}
	return t, nil
}

// signingAlgorithms are those an API server signs ServiceAccount tokens
// with.
var signingAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512}
