package addonauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// algorithms the API server signs service-account tokens with (RSA or
// ECDSA keys); "none" and HMAC are never accepted.
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512}

// maxTokenBytes bounds a token: a JWT of the API server is about 1 KiB.
const maxTokenBytes = 16 << 10

// Why a token is refused. Each is a 401; the text goes into
// WWW-Authenticate's error_description and the log, never the token.
var (
	errNotJWT        = errors.New("the token is not a JWT")
	errForeignIssuer = errors.New("the token is not from the cluster's service-account issuer")
	errUnknownIssuer = errors.New("the token names an issuer the cluster's discovery does not, and no review can vouch for it")
	errBadSignature  = errors.New("the token's signature does not verify")
	errAudience      = errors.New("the token is not meant for this service: its audience is another")
	errExpired       = errors.New("the token has expired")
	errNotYetValid   = errors.New("the token is not valid yet")
	errBadClaims     = errors.New("the token's claims are not a service account's")
	errReviewDenied  = errors.New("the API server does not accept the token")
	errTooLong       = errors.New("the token is too long")
	errSpace         = errors.New("the token has a space in it")
	errMissing       = errors.New("no bearer token")
)

// serviceAccountClaims are the private claims of a service-account token.
type serviceAccountClaims struct {
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// origin is what the local check tells of where a token comes from.
type origin int

const (
	// fromIssuer: signed with the cluster's key, by an issuer its
	// discovery names.
	fromIssuer origin = iota
	// fromKey: signed with the cluster's key, by an issuer its discovery
	// does not name, even after a refetch: an issuer the API server was
	// given before this process started (--service-account-issuer=new
	// --service-account-issuer=old names only the new one), or one it
	// never had, if the key is shared. Only TokenReview can tell.
	fromKey
	// foreign: not the cluster's (not a JWT, another issuer, a key the
	// cluster does not have); TokenReview may still know it.
	foreign
)

// verifyLocal checks token against the cluster's keys and issuers, the
// audience and the time. A nil error gives the user the claims name; the
// origin says whether a review must also vouch for the issuer (fromKey),
// or, with an error, whether the token is foreign.
func (a *Authenticator) verifyLocal(ctx context.Context, token string) (User, origin, error) {
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil || len(tok.Headers) != 1 {
		return User{}, foreign, errNotJWT
	}
	// The claims are read unverified only to tell a foreign issuer from a
	// bad signature: nothing in them is trusted before the signature is.
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return User{}, foreign, errNotJWT
	}
	set, err := a.keys.lookup(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return User{}, fromIssuer, err
	}
	// A token that names an issuer of the cluster's with a key the cluster
	// does not have, or a signature its key did not make, is forged:
	// refused here, whatever ReviewForeign says.
	refused := func() (User, origin, error) {
		if set.names(unverified.Issuer) {
			return User{}, fromIssuer, errBadSignature
		}
		return User{}, foreign, errForeignIssuer
	}
	key, ok := set.byID[tok.Headers[0].KeyID]
	if !ok {
		return refused()
	}
	var std jwt.Claims
	var sa serviceAccountClaims
	if err := tok.Claims(&key, &std, &sa); err != nil {
		return refused()
	}
	// The cluster's key signed it: its issuer is one the API server was
	// given, or was once. One it does not name yet may be new.
	from := fromIssuer
	if !set.names(std.Issuer) {
		if set, err = a.refetchFor(ctx, std); err != nil {
			return User{}, fromIssuer, err
		}
		if !set.names(std.Issuer) {
			from = fromKey
		}
	}
	// The issuer is settled above: any of the cluster's, or a review's.
	err = std.ValidateWithLeeway(jwt.Expected{AnyAudience: jwt.Audience(a.opts.Audiences), Time: a.opts.now()}, a.opts.Leeway)
	switch {
	case errors.Is(err, jwt.ErrInvalidAudience):
		return User{}, from, errAudience
	case errors.Is(err, jwt.ErrExpired):
		return User{}, from, errExpired
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return User{}, from, errNotYetValid
	case err != nil:
		return User{}, from, fmt.Errorf("%w: %w", errBadClaims, err)
	}
	if std.Expiry == nil {
		return User{}, from, fmt.Errorf("%w: no expiry", errBadClaims)
	}
	u, err := serviceAccountUser(std, sa)
	return u, from, err
}

// refetchFor is the key set fetched again, if need be, for a token of the
// cluster's key whose issuer it does not name. With reviews, a refetch
// within KeyRefetchInterval is not needed: the review decides meanwhile.
// Under NoReview nothing else can vouch for the issuer: discovery is
// fetched as soon as it may tell something new (see keySet.settle). A
// fetch tells about a token when it began after the token was issued, as
// far as the clocks can say: iat holds whole seconds, and the API server's
// clock may differ from this one's by the Leeway.
func (a *Authenticator) refetchFor(ctx context.Context, std jwt.Claims) (*keys, error) {
	if !a.opts.NoReview || std.IssuedAt == nil {
		return a.keys.withIssuer(ctx, std.Issuer)
	}
	// An iat in the future (within the leeway, or refused below) is now.
	iat := std.IssuedAt.Time()
	if now := a.opts.now(); now.Before(iat) {
		iat = now
	}
	return a.keys.settle(ctx, std.Issuer, iat.Truncate(time.Second).Add(time.Second+a.opts.Leeway))
}

// anyAlgorithm lists every signature algorithm go-jose parses: a foreign
// token's signature is not checked here, only its expiry read.
var anyAlgorithm = []jose.SignatureAlgorithm{jose.EdDSA, jose.HS256, jose.HS384, jose.HS512,
	jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512}

// foreignExpiry is the exp claim of a foreign token that is a signed JWT;
// zero when it is not one, or has none a time can hold. It is not
// verified (only the API server can verify the token), so it may only
// shorten access: a token is never served past it, and one past it is
// refused unreviewed.
func foreignExpiry(token string) time.Time {
	tok, err := jwt.ParseSigned(token, anyAlgorithm)
	if err != nil {
		return time.Time{}
	}
	// Only exp is read, as the API server's OIDC authenticator reads it (a
	// number, or a numeric string): a claim go-jose's Claims would not
	// read (a numeric jti) must not hide it.
	var payload json.RawMessage
	if err := tok.UnsafeClaimsWithoutVerification(&payload); err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == "" {
		return time.Time{}
	}
	exp, err := claims.Exp.Float64()
	if err != nil || math.Abs(exp) >= 1<<62 { // past it, time.Unix wraps
		return time.Time{}
	}
	return time.Unix(int64(exp), 0)
}

// serviceAccountUser is the user the API server would name for a verified
// service-account token: system:serviceaccount:<namespace>:<name>, in the
// groups of all service accounts and of its namespace.
func serviceAccountUser(std jwt.Claims, sa serviceAccountClaims) (User, error) {
	ns, name := sa.Kubernetes.Namespace, sa.Kubernetes.ServiceAccount.Name
	if ns == "" || name == "" || std.Subject != "system:serviceaccount:"+ns+":"+name || strings.ContainsAny(ns+name, ":\r\n") {
		return User{}, errBadClaims
	}
	return User{
		Name:    std.Subject,
		UID:     sa.Kubernetes.ServiceAccount.UID,
		Groups:  []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		Expires: std.Expiry.Time().Truncate(time.Second),
	}, nil
}
