package gke_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/authvault/authvault/testkit/hubtrust"
)

// pool is what the stand-in's workload identity pool provider knows, as
// Google does: the issuer it trusts and the audience it allows (trust,
// whose Subject is left empty), its attribute condition on the subject,
// and which principal IAM lets impersonate which service account.
type pool struct {
	provider      string            // its full resource name: the exchange's audience
	trust         hubtrust.Trust    // issuer, CA, allowed audience, clock
	subject       string            // the attribute condition: assertion.sub == subject
	impersonators map[string]string // service account email → the principal with roles/iam.workloadIdentityUser on it
	quote         bool              // refuse every token, quoting it in the description
}

// principal is how IAM names the pool's identity for a token's subject
// (google.subject=assertion.sub).
func (p *pool) principal(sub string) string {
	poolName, _, _ := strings.Cut(strings.TrimPrefix(p.provider, "//"), "/providers/")
	return "principal://" + poolName + "/subject/" + sub
}

// exchange is Google's STS for a pool provider: RFC 8693 token exchange,
// the subject token checked as the provider checks an OIDC provider's
// token (hubtrust: keys, signature, issuer, audience, expiry), then the
// attribute condition. Refusals in the STS's wire format: 400 with an
// OAuth2 error and error_description.
func (g *standIn) exchange(w http.ResponseWriter, r *http.Request, p *pool) {
	g.stsCalls.Add(1)
	subject := r.PostFormValue("subject_token")
	for k, want := range map[string]string{
		"grant_type":           "urn:ietf:params:oauth:grant-type:token-exchange",
		"subject_token_type":   "urn:ietf:params:oauth:token-type:jwt",
		"requested_token_type": "urn:ietf:params:oauth:token-type:access_token",
	} {
		if got := r.PostFormValue(k); got != want {
			g.fail(w, "%s: got %q, want %q", k, got, want)
			return
		}
	}
	if p.quote {
		oauthError(w, "invalid_grant", "The ID Token ["+subject+"] could not be verified.")
		return
	}
	if got := r.PostFormValue("audience"); got != p.provider {
		oauthError(w, "invalid_target", `The target service indicated by the "audience" parameters is invalid: no such pool provider, or it is disabled.`)
		return
	}
	claims, err := p.trust.Check(r.Context(), subject)
	if err != nil {
		oauthError(w, "invalid_grant", "The ID Token could not be verified: "+err.Error()+".")
		return
	}
	if claims.Subject != p.subject {
		oauthError(w, "unauthorized_client", "The given credential is rejected by the attribute condition.")
		return
	}
	if asked := r.PostFormValue("scope"); !g.scoped(asked) {
		g.fail(w, "scope: got %q, want %s among them", asked, scope)
		return
	}
	g.issueAs(w, "ya29.sts-", p.principal(claims.Subject))
}

// generateAccessToken is the IAM Service Account Credentials API's
// generateAccessToken: the caller's bearer token must be one the stand-in
// issued, live, for a principal with roles/iam.workloadIdentityUser on the
// account; refusals as a Google API answers them.
func (g *standIn) generateAccessToken(w http.ResponseWriter, r *http.Request) {
	g.iamCalls.Add(1)
	if g.answered(w, r) {
		return
	}
	account, ok := strings.CutSuffix(r.PathValue("call"), ":generateAccessToken")
	if !ok {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "Method not found.")
		return
	}
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	g.mu.Lock()
	gr, known := g.tokens[bearer]
	g.mu.Unlock()
	p := g.pool.Load()
	switch {
	case g.echoIAM.Load():
		apiError(w, http.StatusForbidden, "PERMISSION_DENIED", "Permission denied for the caller "+r.Header.Get("Authorization"))
		return
	case !known || gr.revoked || !time.Now().Before(gr.expiry):
		apiError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		return
	case p == nil || p.impersonators[account] != gr.who:
		apiError(w, http.StatusForbidden, "PERMISSION_DENIED", "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).")
		return
	}
	var body struct {
		Scope    []string `json:"scope"`
		Lifetime string   `json:"lifetime"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Lifetime != "3600s" {
		g.t.Errorf("google stand-in: generateAccessToken body: %v, lifetime %q", err, body.Lifetime)
	}
	if !g.scoped(strings.Join(body.Scope, " ")) {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Request contains an invalid argument.")
		return
	}
	tok, expiry := g.mint("ya29.imp-", account, g.impersonatedIn.Load())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"accessToken": tok, "expireTime": expiry.UTC().Format(time.RFC3339)})
}

// oauthError answers 400 with an OAuth2 error, as Google's STS does.
func oauthError(w http.ResponseWriter, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}

// apiError answers as a Google API does: {"error": {code, message, status}}.
func apiError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": status, "message": message, "status": code}})
}

// note records the subject token of an exchange.
func (g *standIn) note(r *http.Request) {
	subject := r.PostFormValue("subject_token")
	g.mu.Lock()
	g.subjects = append(g.subjects, subject)
	g.mu.Unlock()
}

// seen returns the subject tokens the pool was asked to exchange.
func (g *standIn) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.subjects)
}

// issuedTokens returns every token the stand-in issued.
func (g *standIn) issuedTokens() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var toks []string
	for tok := range g.tokens {
		toks = append(toks, tok)
	}
	return toks
}
