package eks_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/authvault/authvault/testkit/hubtrust"
)

// oidcTrust is what an AWS account knows of a hub, and how its STS
// answers AssumeRoleWithWebIdentity: an IAM OIDC identity provider for the
// hub's issuer whose client ID is the audience (hubtrust checks the token's
// signature against the hub's JWKS, its issuer, audience and expiry), and
// roles whose trust policies allow that provider's tokens for one subject
// each (a StringEquals on <issuer>:sub). It refuses with STS's codes:
// InvalidIdentityToken (400) for an issuer it has no provider for, a bad
// signature or audience; ExpiredTokenException (400) past the token's exp
// on its clock; AccessDenied (403) for a role that does not allow the
// subject.
type oidcTrust struct {
	provider hubtrust.Trust    // the OIDC provider: its Subject is not set
	roles    map[string]string // role ARN → the sub its trust policy allows

	// Set before the first exchange.
	clock  func() time.Time // STS's; default time.Now
	refuse string           // when set, every exchange that passes is refused with this code (403)

	unavailable atomic.Int32 // this many exchanges are answered 503 first

	mu     sync.Mutex // guards tokens
	tokens []string   // every token presented, in order
}

// presented are the tokens presented to AssumeRoleWithWebIdentity.
func (o *oidcTrust) presented() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.tokens)
}

// exchange answers AssumeRoleWithWebIdentity for s.
func (o *oidcTrust) exchange(w http.ResponseWriter, r *http.Request, s *stsStub, params url.Values) {
	token, role := params.Get("WebIdentityToken"), params.Get("RoleArn")
	o.mu.Lock()
	o.tokens = append(o.tokens, token)
	o.mu.Unlock()
	if o.unavailable.Add(-1) >= 0 {
		s.record("refused:ServiceUnavailable")
		stsError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "service unavailable")
		return
	}
	code, status, msg := o.check(r, token, role, params.Get("RoleSessionName"))
	if code != "" {
		s.record("refused:" + code)
		stsError(w, status, code, msg)
		return
	}
	s.issue(w, "AssumeRoleWithWebIdentity", role, params.Get("RoleSessionName"))
}

// check is STS's verdict on token for role: an error code, its status and
// message, or no code.
func (o *oidcTrust) check(r *http.Request, token, role, session string) (code string, status int, msg string) {
	const invalid, expired, denied = "InvalidIdentityToken", "ExpiredTokenException", "AccessDenied"
	if session == "" {
		return "ValidationError", http.StatusBadRequest, "no RoleSessionName"
	}
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		return invalid, http.StatusBadRequest, "the web identity token is not a JWT"
	}
	var unverified jwt.Claims
	if err := parsed.UnsafeClaimsWithoutVerification(&unverified); err != nil || unverified.Expiry == nil {
		return invalid, http.StatusBadRequest, "the web identity token has no readable claims"
	}
	if unverified.Issuer != o.provider.Issuer {
		return invalid, http.StatusBadRequest, "No OpenIDConnect provider found in your account for " + unverified.Issuer
	}
	allowed, ok := o.roles[role]
	if !ok {
		return denied, http.StatusForbidden, "Not authorized to perform sts:AssumeRoleWithWebIdentity"
	}
	now := time.Now
	if o.clock != nil {
		now = o.clock
	}
	// Everything but the expiry first, at a time the token is valid: a
	// forged token is invalid, whenever it expires.
	exp := unverified.Expiry.Time()
	t := o.provider
	t.Now = func() time.Time {
		if n := now(); n.Before(exp) {
			return n
		}
		return exp.Add(-time.Second)
	}
	claims, err := t.Check(r.Context(), token)
	switch {
	case err != nil:
		return invalid, http.StatusBadRequest, "the web identity token is not valid: " + err.Error()
	case !now().Before(exp):
		return expired, http.StatusBadRequest, fmt.Sprintf("Token expired: current date/time %s must be before the expiration date/time %s",
			now().UTC().Format(time.RFC3339), exp.UTC().Format(time.RFC3339))
	case claims.Subject != allowed:
		return denied, http.StatusForbidden, "Not authorized to perform sts:AssumeRoleWithWebIdentity"
	case o.refuse != "":
		// Quoting the token back, as a server may: no error may show it.
		return o.refuse, http.StatusForbidden, "the identity provider reported that authentication failed for " + token
	}
	return "", 0, ""
}
