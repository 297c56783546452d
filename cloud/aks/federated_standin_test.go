package aks_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/authvault/authvault/testkit/hubtrust"
)

// federatedEntra is the stand-in's application with a federated identity
// credential: Entra ID checks a client assertion against the credential's
// issuer (its discovery document and keys), subject and audience
// (hubtrust), then gives a token, or refuses with its AADSTS code.
type federatedEntra struct {
	trust       atomic.Pointer[hubtrust.Trust] // the federated identity credential; nil: none, the assertion is checked as before
	refuse      atomic.Int64                   // an AADSTS code to answer to every federated request once checked; 0: none
	unavailable atomic.Int64                   // answer 503 to this many more federated requests

	mu         sync.Mutex // guards assertions, refused
	assertions []string   // every hub token presented
	refused    []int      // the codes answered
}

// presented returns the hub tokens presented so far, and the codes the
// stand-in refused with.
func (e *entra) presented() (assertions []string, refused []int) {
	e.fed.mu.Lock()
	defer e.fed.mu.Unlock()
	return slices.Clone(e.fed.assertions), slices.Clone(e.fed.refused)
}

// federated answers a client assertion when the application has a
// federated identity credential, as Entra ID does.
func (e *entra) federated(w http.ResponseWriter, r *http.Request, trust hubtrust.Trust) {
	f := r.PostForm
	tok := f.Get("client_assertion")
	e.fed.mu.Lock()
	e.fed.assertions = append(e.fed.assertions, tok)
	e.fed.mu.Unlock()
	if e.fed.unavailable.Load() > 0 {
		e.fed.unavailable.Add(-1)
		e.refuse(w, http.StatusServiceUnavailable, "temporarily_unavailable", 90033, "A transient error has occurred. Please try again.")
		return
	}
	for k, want := range map[string]string{
		"grant_type":            "client_credentials",
		"client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
	} {
		if got := f.Get(k); got != want {
			e.t.Errorf("entra stand-in: %s: got %q, want %q", k, got, want)
			e.refuse(w, http.StatusBadRequest, "invalid_request", 900144, "The request body must contain the parameter "+k+".")
			return
		}
	}
	if scopes := strings.Fields(f.Get("scope")); !slices.Contains(scopes, e.wantScope()) {
		e.t.Errorf("entra stand-in: scope: got %q, want %q among them", scopes, e.wantScope())
		e.refuse(w, http.StatusBadRequest, "invalid_scope", 1002012, "The provided value for scope is not valid.")
		return
	}
	if id := f.Get("client_id"); id != client {
		e.refuse(w, http.StatusBadRequest, "unauthorized_client", 700016,
			fmt.Sprintf("Application with identifier '%s' was not found in the directory.", id))
		return
	}
	claims, err := trust.Check(r.Context(), tok)
	if err != nil {
		code, text := why(trust, tok)
		e.refuse(w, http.StatusUnauthorized, "invalid_client", code, text)
		return
	}
	if code := int(e.fed.refuse.Load()); code != 0 {
		status, oauth := http.StatusUnauthorized, "invalid_client"
		if code == 50027 || code == 50166 {
			status, oauth = http.StatusBadRequest, "invalid_request"
		}
		e.refuse(w, status, oauth, code, "Refused as a test asked.")
		return
	}
	e.record(r, tokenRequest{client: client, scope: e.wantScope(), grant: "federated " + claims.Subject})
	e.grant(w)
}

// why is the code and text with which Entra ID refuses tok, which trust's
// check failed: the first of its checks tok fails, read from its claims,
// unverified (the check above verified what decides).
func why(trust hubtrust.Trust, tok string) (int, string) {
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		return 50027, "JWT token is invalid or malformed."
	}
	now := time.Now
	if trust.Now != nil {
		now = trust.Now
	}
	switch {
	case c.Issuer != trust.Issuer:
		return 700211, fmt.Sprintf("No matching federated identity record found for presented assertion issuer '%s'.", c.Issuer)
	case c.Subject != trust.Subject:
		return 700213, fmt.Sprintf("No matching federated identity record found for presented assertion subject '%s'.", c.Subject)
	case !slices.Contains([]string(c.Audience), trust.Audience):
		return 700212, fmt.Sprintf("No matching federated identity record found for presented assertion audience '%s'.", strings.Join(c.Audience, ","))
	case c.ExpiresAt == nil || !now().Before(c.ExpiresAt.Time):
		return 700024, fmt.Sprintf("Client assertion is not within its valid time range. Current time: %s.", now().UTC().Format(time.RFC3339))
	}
	return 700027, "Client assertion failed signature validation."
}

// refuse answers as Entra ID refuses a token request.
func (e *entra) refuse(w http.ResponseWriter, status int, oauth string, code int, text string) {
	e.fed.mu.Lock()
	e.fed.refused = append(e.fed.refused, code)
	e.fed.mu.Unlock()
	now := time.Now().UTC()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error":             oauth,
		"error_description": fmt.Sprintf("AADSTS%d: %s Trace ID: 0e7c Correlation ID: 5d1a Timestamp: %s", code, text, now.Format(time.DateTime)+"Z"),
		"error_codes":       []int{code},
		"timestamp":         now.Format(time.DateTime) + "Z",
		"trace_id":          "0e7c",
		"correlation_id":    "5d1a",
		"error_uri":         fmt.Sprintf("https://login.microsoftonline.com/error?code=%d", code),
	})
}
