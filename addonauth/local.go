package addonauth

import (
	"context"
	"errors"
	"fmt"
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
	errBadSignature  = errors.New("the token's signature does not verify")
	errAudience      = errors.New("the token is not meant for this service")
	errExpired       = errors.New("the token has expired")
	errNotYetValid   = errors.New("the token is not valid yet")
	errBadClaims     = errors.New("the token's claims are not a service account's")
	errReviewDenied  = errors.New("the API server does not accept the token")
	errTooLong       = errors.New("the token is too long")
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

// verifyLocal checks token against the issuer's keys, the audience and the
// time. foreign tells that the token is not the issuer's (not a JWT,
// another issuer, a key the issuer does not have): TokenReview may still
// know it. A nil error gives the user the claims name.
func (a *Authenticator) verifyLocal(ctx context.Context, token string) (u User, foreign bool, err error) {
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil || len(tok.Headers) != 1 {
		return User{}, true, errNotJWT
	}
	// The claims are read unverified only to tell a foreign issuer from a
	// bad signature: nothing in them is trusted before the signature is.
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return User{}, true, errNotJWT
	}
	issuer, key, err := a.keys.lookup(ctx, tok.Headers[0].KeyID)
	switch {
	case errors.Is(err, errUnknownKey):
		if unverified.Issuer != issuer {
			return User{}, true, errForeignIssuer
		}
		return User{}, false, errBadSignature // the issuer's name with a key it does not have
	case err != nil:
		return User{}, false, err
	}
	if unverified.Issuer != issuer {
		return User{}, true, errForeignIssuer
	}
	var std jwt.Claims
	var sa serviceAccountClaims
	if err := tok.Claims(key, &std, &sa); err != nil {
		return User{}, false, errBadSignature
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience(a.opts.Audiences), Time: a.opts.now()}, a.opts.Leeway)
	switch {
	case errors.Is(err, jwt.ErrInvalidAudience):
		return User{}, false, errAudience
	case errors.Is(err, jwt.ErrExpired):
		return User{}, false, errExpired
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return User{}, false, errNotYetValid
	case err != nil:
		return User{}, false, fmt.Errorf("%w: %w", errBadClaims, err)
	}
	if std.Expiry == nil {
		return User{}, false, fmt.Errorf("%w: no expiry", errBadClaims)
	}
	return serviceAccountUser(std, sa)
}

// serviceAccountUser is the user the API server would name for a verified
// service-account token: system:serviceaccount:<namespace>:<name>, in the
// groups of all service accounts and of its namespace.
func serviceAccountUser(std jwt.Claims, sa serviceAccountClaims) (User, bool, error) {
	ns, name := sa.Kubernetes.Namespace, sa.Kubernetes.ServiceAccount.Name
	if ns == "" || name == "" || std.Subject != "system:serviceaccount:"+ns+":"+name || strings.ContainsAny(ns+name, ":\r\n") {
		return User{}, false, errBadClaims
	}
	return User{
		Name:    std.Subject,
		UID:     sa.Kubernetes.ServiceAccount.UID,
		Groups:  []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		Expires: std.Expiry.Time().Truncate(time.Second),
	}, false, nil
}
