package aks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/go-logr/logr"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/login/loginhttp"
	"github.com/authvault/authvault/redact"
)

// FederatedAudience is the audience an Entra ID federated identity
// credential takes unless it names another: the audience to mint the
// hub's tokens for (federation.Config.Audiences).
const FederatedAudience = "api://AzureADTokenExchange"

// FederatedOptions says which Entra ID application the hub's tokens are
// exchanged for, and the token of which server application they get.
type FederatedOptions struct {
	// TenantID is the Entra ID tenant of the application (required).
	TenantID string
	// ClientID is the application (client) ID of the app registration, or
	// the client ID of the user-assigned managed identity, whose federated
	// identity credential names the hub's issuer, its ServiceAccount's
	// subject and the token's audience (required).
	ClientID string
	// ServerID is the server application's ID, as in Options. Default:
	// DefaultServerID.
	ServerID string
	// CredentialOptions configure the azidentity credential each exchange
	// makes: its cloud (default: Azure's public cloud, or
	// AZURE_AUTHORITY_HOST), HTTP client, retries of a 5xx or of no answer
	// (default: azcore's 3, before the vault's own) and instance discovery.
	// Its Cache is ignored: each exchange starts with an empty one.
	CredentialOptions azidentity.ClientAssertionCredentialOptions
}

// Federated is the federation.Provider of AKS members: it presents the
// hub's token to Entra ID's token endpoint as a client assertion
// (azidentity's ClientAssertionCredential, the client credentials grant
// with a jwt-bearer assertion) for the server application's scope, and
// gives the access token to the member, with the member's CA. The
// credential expires with the access token.
//
// Each call makes a new credential, whose token cache is empty: every login
// exchanges the token the hub has just minted, never one of an earlier
// login. A refusal of the hub's token (no federated identity credential
// for its issuer, subject or audience; expired; not a valid JWT; the
// issuer's keys out of reach or not its signer) is an error that wraps
// federation.ErrRejected and names Entra ID's AADSTS code.
func Federated(opts FederatedOptions) federation.Provider {
	if opts.ServerID == "" {
		opts.ServerID = DefaultServerID
	}
	opts.CredentialOptions.Cache = azidentity.Cache{}
	opts.CredentialOptions.AdditionallyAllowedTenants = slices.Clone(opts.CredentialOptions.AdditionallyAllowedTenants)
	return &federated{opts: opts, scope: strings.TrimRight(opts.ServerID, "/") + "/.default"}
}

// federated is Federated's provider: set once, then read only, so that
// its calls for different members may run at once.
type federated struct {
	opts  FederatedOptions
	scope string // the server ID and "/.default"
}

// Credential exchanges token for an access token of the server application.
func (f *federated) Credential(ctx context.Context, token federation.Token, member federation.Member) (*login.ConnectionInfo, error) {
	from := fmt.Sprintf("application %s of tenant %s (federated identity credential)", f.opts.ClientID, f.opts.TenantID)
	e := &Error{Server: redact.URL(member.Server), Credential: from}
	switch {
	case f.opts.TenantID == "" || f.opts.ClientID == "":
		e.What = "FederatedOptions.TenantID and ClientID are required: the application whose federated identity credential trusts the hub"
		return nil, login.Permanent(e)
	case member.Server == "":
		e.What = "the member has no server"
		return nil, login.Permanent(e)
	}
	assertion := token.Value()
	opts := f.opts.CredentialOptions
	cred, err := azidentity.NewClientAssertionCredential(f.opts.TenantID, f.opts.ClientID,
		func(context.Context) (string, error) { return assertion, nil }, &opts)
	if err != nil {
		// A tenant ID that is no ID, an authority host that is no URL: its
		// text quotes neither the token nor a response.
		e.What = redact.Secrets(err, assertion).Error()
		return nil, login.Permanent(e)
	}
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{f.scope}})
	if err != nil {
		return nil, federatedFailure(ctx, e, err, assertion)
	}
	if tok.Token == "" || tok.ExpiresOn.IsZero() {
		e.What = "the token has no value or no expiry"
		return nil, e
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("aks: access token for the hub's token", "server", e.Server,
		"credential", from, "hubKey", token.KeyID, "expiration", tok.ExpiresOn.UTC().Format(time.RFC3339))
	return &login.ConnectionInfo{
		Server:        member.Server,
		CAData:        member.CAData,
		CAPath:        member.CAPath,
		TLSServerName: member.TLSServerName,
		Token:         tok.Token,
		Expiration:    tok.ExpiresOn,
	}, nil
}

// refusals are Entra ID's codes (AADSTS numbers) that refuse the hub's
// token itself, each with what it means for the operator.
var refusals = map[int]string{
	70021:   "no federated identity credential of the application matches the token's issuer, subject and audience",
	70025:   "the application has no federated identity credential",
	700211:  "no federated identity credential of the application names the token's issuer",
	700212:  "no federated identity credential of the application names the token's audience",
	700213:  "no federated identity credential of the application names the token's subject",
	7002138: "the token's subject matches a federated identity credential's only when case is ignored",
	700024:  "the token is outside its valid time range (expired, or not valid yet)",
	700027:  "the token's signature does not verify with the issuer's keys",
	50027:   "the token is not a valid JWT",
	50166:   "Entra ID could not fetch the issuer's discovery document or keys",
}

// federatedFailure is e for err, a failed exchange: Entra ID's answer
// (method, URL, status, OAuth2 error and AADSTS codes, never its body), or
// the first line of azidentity's text for a request that got none, with
// the hub's token masked. A refusal of the hub's token wraps
// federation.ErrRejected; another 4xx is permanent.
func federatedFailure(ctx context.Context, e *Error, err error, assertion string) error {
	var auth *azidentity.AuthenticationFailedError
	switch {
	case ctx.Err() != nil:
		e.What, e.cause = ctx.Err().Error(), ctx.Err()
		return e
	case !errors.As(err, &auth) || auth.RawResponse == nil:
		text, _, _ := strings.Cut(redact.Secrets(err, assertion).Error(), "\n")
		e.What = strings.Join(strings.Fields(text), " ")
		if len(e.What) > maxText {
			e.What = e.What[:maxText] + "…"
		}
		return e
	}
	ex := loginhttp.Response(auth.RawResponse)
	e.What = ex.String()
	if !loginhttp.PermanentStatus(ex.Status) {
		return e
	}
	for _, code := range entraCodes(auth.RawResponse) {
		if why, ok := refusals[code]; ok {
			e.What += ": " + why
			e.cause = federation.ErrRejected
			return e
		}
	}
	return login.Permanent(e)
}

// entraCodes are the error_codes of Entra ID's error answer resp.
func entraCodes(resp *http.Response) []int {
	if resp.Body == nil {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	if err != nil {
		return nil
	}
	var answer struct {
		Codes []int `json:"error_codes"`
	}
	if json.Unmarshal(body, &answer) != nil {
		return nil
	}
	return answer.Codes
}
