package flux_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// googleSTS is Google's STS token exchange (RFC 8693, form in, JSON out)
// for the pool provider gcpPool, which trusts the hub's issuer and allows
// its full resource name as audience. It issues a federated token that
// speaks for the pool's principal of the token's subject.
func (c *clouds) googleSTS(w http.ResponseWriter, r *http.Request) {
	c.count("gcp sts.googleapis.com/v1/token")
	oauthFault := func(code, description string) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": description})
	}
	if r.PostFormValue("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" ||
		r.PostFormValue("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt" {
		oauthFault("invalid_request", "not a token exchange of a JWT")
		return
	}
	if r.PostFormValue("audience") != gcpAudience {
		oauthFault("invalid_target", "The target service indicated by the \"audience\" parameters is invalid.")
		return
	}
	trust, ok := c.trust(gcpAudience, "")
	if !ok {
		oauthFault("invalid_grant", "the hub is not up")
		return
	}
	claims, err := trust.Check(r.Context(), r.PostFormValue("subject_token"))
	if err != nil {
		oauthFault("invalid_grant", "The ID Token could not be verified: "+err.Error())
		return
	}
	pool, _, _ := strings.Cut(strings.TrimPrefix(gcpAudience, "//"), "/providers/")
	tok := c.issue("ya29.sts-", "principal://"+pool+"/subject/"+claims.Subject)
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
		"token_type": "Bearer", "expires_in": int(lifetime.Seconds()),
	})
}

// generateAccessToken is the IAM Service Account Credentials API: the
// caller's federated token must be the principal of clouds/wif, which
// may impersonate gcpAccount alone.
func (c *clouds) generateAccessToken(w http.ResponseWriter, r *http.Request) {
	c.count("gcp iamcredentials generateAccessToken")
	apiFault := func(status int, code, message string) {
		writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "status": code, "message": message}})
	}
	account := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/projects/-/serviceAccounts/"), ":generateAccessToken")
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	c.mu.Lock()
	who, ok := c.tokens[bearer]
	c.mu.Unlock()
	switch {
	case !ok:
		apiFault(http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
	case account != gcpAccount || !strings.HasSuffix(who, "/subject/"+subject("wif")):
		apiFault(http.StatusForbidden, "PERMISSION_DENIED", "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).")
	default:
		tok := c.issue("ya29.imp-", account)
		writeJSON(w, http.StatusOK, map[string]string{"accessToken": tok, "expireTime": time.Now().Add(lifetime).UTC().Format(time.RFC3339)})
	}
}

// entraDiscovery answers MSAL's instance discovery for the host asked.
func (c *clouds) entraDiscovery(w http.ResponseWriter, r *http.Request) {
	c.count("azure instance discovery")
	host := r.Host
	writeJSON(w, http.StatusOK, map[string]any{
		"tenant_discovery_endpoint": "https://" + host + "/" + azureTenant + "/v2.0/.well-known/openid-configuration",
		"metadata":                  []map[string]any{{"preferred_network": host, "preferred_cache": host, "aliases": []string{host}}},
	})
}

// entraMetadata is the tenant's OpenID configuration, at the host asked.
func (c *clouds) entraMetadata(w http.ResponseWriter, r *http.Request) {
	c.count("azure tenant metadata")
	tenant := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")[0]
	if tenant != azureTenant {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_tenant", "error_description": "AADSTS90002: Tenant '" + tenant + "' not found.", "error_codes": []int{90002}})
		return
	}
	base := "https://" + r.Host + "/" + tenant
	writeJSON(w, http.StatusOK, map[string]any{
		"token_endpoint": base + "/oauth2/v2.0/token", "authorization_endpoint": base + "/oauth2/v2.0/authorize", "issuer": base + "/v2.0",
	})
}

// armScope is Azure Resource Manager's, which Flux asks a token for to
// read an AKS cluster's kubeconfigs.
const armScope = "https://management.core.windows.net//.default"

// entraToken is Entra ID's token endpoint: the client credentials grant
// with the hub's token as client assertion, checked against the
// application's federated identity credential (issuer, sub clouds/azwi,
// audience api://AzureADTokenExchange).
func (c *clouds) entraToken(w http.ResponseWriter, r *http.Request) {
	c.count("azure token")
	refuse := func(status int, oauth string, code int, text string) {
		writeJSON(w, status, map[string]any{"error": oauth, "error_description": fmt.Sprintf("AADSTS%d: %s", code, text), "error_codes": []int{code}})
	}
	if err := r.ParseForm(); err != nil {
		refuse(http.StatusBadRequest, "invalid_request", 900144, "unreadable body")
		return
	}
	f := r.PostForm
	switch {
	case !strings.HasPrefix(r.URL.Path, "/"+azureTenant+"/"):
		refuse(http.StatusBadRequest, "invalid_request", 90002, "Tenant not found.")
		return
	case f.Get("grant_type") != "client_credentials" || f.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
		refuse(http.StatusBadRequest, "invalid_request", 900144, "not a client credentials grant with a JWT assertion")
		return
	case f.Get("client_id") != azureClient:
		refuse(http.StatusBadRequest, "unauthorized_client", 700016, fmt.Sprintf("Application with identifier '%s' was not found in the directory.", f.Get("client_id")))
		return
	case !slices.Contains(strings.Fields(f.Get("scope")), azureScope) && !slices.Contains(strings.Fields(f.Get("scope")), armScope):
		refuse(http.StatusBadRequest, "invalid_scope", 1002012, "The provided value for scope is not valid.")
		return
	}
	trust, ok := c.trust("api://AzureADTokenExchange", subject("azwi"))
	if !ok {
		refuse(http.StatusUnauthorized, "invalid_client", 700027, "the hub is not up")
		return
	}
	if _, err := trust.Check(r.Context(), f.Get("client_assertion")); err != nil {
		refuse(http.StatusUnauthorized, "invalid_client", 700213, "No matching federated identity record found for presented assertion: "+err.Error())
		return
	}
	tok := c.issue("eyJ0eXAiOiJKV1QifQ.entra-", azureClient)
	writeJSON(w, http.StatusOK, map[string]any{
		"token_type": "Bearer", "expires_in": int(lifetime.Seconds()), "ext_expires_in": int(lifetime.Seconds()), "access_token": tok,
	})
}
