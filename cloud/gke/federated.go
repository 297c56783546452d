package gke

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google/externalaccount"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/login/loginhttp"
	"github.com/authvault/authvault/redact"
)

// Google's endpoints, FederatedOptions' defaults.
const (
	stsURL            = "https://sts.googleapis.com/v1/token"
	iamCredentialsURL = "https://iamcredentials.googleapis.com"
)

// jwtTokenType is the STS subject token type of a ServiceAccount token: an
// OIDC provider's JWT.
const jwtTokenType = "urn:ietf:params:oauth:token-type:jwt"

// FederatedOptions says which workload identity pool provider exchanges
// the hub's tokens, and as whom the member is then reached.
type FederatedOptions struct {
	// Audience is the workload identity pool provider that trusts the
	// hub's ServiceAccount issuer, by its full resource name:
	// //iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER.
	// Required. Mint the hub's tokens for one of the audiences the
	// provider allows: AllowedAudience(Audience) when it lists none.
	Audience string
	// ServiceAccount is the email of a Google service account to
	// impersonate with the federated token: the member's credential is then
	// that account's token (an hour), and GKE names the account. The pool's
	// principal for the hub's ServiceAccount needs
	// roles/iam.workloadIdentityUser on it. Default: none, the federated
	// token itself is the credential.
	ServiceAccount string
	// Scopes of the member's token. Default: DefaultScope and userinfo.email,
	// as Login asks. With ServiceAccount, the exchange asks DefaultScope,
	// which impersonation needs, and the impersonated token these.
	Scopes []string
	// TokenURL is the STS token endpoint. Default:
	// https://sts.googleapis.com/v1/token. It receives the hub's tokens:
	// set it only from the process's own configuration.
	TokenURL string
	// IAMCredentialsURL is the root of the IAM Service Account Credentials
	// API, which impersonates ServiceAccount. Default:
	// https://iamcredentials.googleapis.com. It receives the federated
	// tokens: set it only from the process's own configuration.
	IAMCredentialsURL string
}

// AllowedAudience is an audience a workload identity pool provider
// configured with no allowed audiences accepts: provider's full resource
// name as an https URL
// (https://iam.googleapis.com/projects/…/providers/PROVIDER). It accepts
// the name itself (//iam.googleapis.com/…) too, which is what Flux and
// this package's Flux mint for. Mint the hub's tokens for one of them
// (federation.Config.Audiences).
func AllowedAudience(provider string) string {
	return "https:" + provider
}

// Federated returns a federation.Provider for GKE members: it exchanges
// the hub's token at Google's STS for a federated access token
// (golang.org/x/oauth2/google/externalaccount, the token as an OIDC
// provider's JWT), impersonates opts.ServiceAccount with it when set, and
// gives the member's server and CA with the Google token. Each call
// exchanges the token it is given: the vault is the cache. The package
// doc's "Federation" says what each side trusts, and which refusals wrap
// federation.ErrRejected.
func Federated(opts FederatedOptions) federation.Provider {
	if len(opts.Scopes) == 0 {
		opts.Scopes = []string{DefaultScope, emailScope}
	}
	if opts.TokenURL == "" {
		opts.TokenURL = stsURL
	}
	if opts.IAMCredentialsURL == "" {
		opts.IAMCredentialsURL = iamCredentialsURL
	}
	return &federated{opts: opts}
}

// federated is the provider; opts are read only.
type federated struct {
	opts FederatedOptions
}

// Credential exchanges token for a Google access token for member.
func (f *federated) Credential(ctx context.Context, token federation.Token, member federation.Member) (*login.ConnectionInfo, error) {
	if err := f.check(member); err != nil {
		return nil, login.Permanent(err)
	}
	answers := &answers{sts: bareURL(f.opts.TokenURL), secrets: []string{token.Value()}}
	rec := &loginhttp.Recorder{Ctx: ctx, Base: answers}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: rec})
	cfg := externalaccount.Config{
		Audience:             f.opts.Audience,
		SubjectTokenType:     jwtTokenType,
		TokenURL:             f.opts.TokenURL,
		Scopes:               f.opts.Scopes,
		SubjectTokenSupplier: supplier{token},
	}
	if f.opts.ServiceAccount != "" {
		cfg.ServiceAccountImpersonationURL = strings.TrimSuffix(f.opts.IAMCredentialsURL, "/") +
			"/v1/projects/-/serviceAccounts/" + url.PathEscape(f.opts.ServiceAccount) + ":generateAccessToken"
	}
	ts, err := externalaccount.NewTokenSource(ctx, cfg)
	if err != nil {
		return nil, f.failed(ctx, rec, answers, member, token, err)
	}
	tok, err := ts.Token()
	if err != nil {
		return nil, f.failed(ctx, rec, answers, member, token, err)
	}
	if tok.AccessToken == "" || tok.Expiry.IsZero() {
		return nil, f.failed(ctx, rec, answers, member, token, errors.New("the token has no value or no expiry"))
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("gke: federated access token", "server", redact.URL(member.Server),
		"credentials", f.from(), "hubKey", token.KeyID, "expiration", tok.Expiry.UTC().Format(time.RFC3339))
	return &login.ConnectionInfo{
		Server:        member.Server,
		CAData:        member.CAData,
		CAPath:        member.CAPath,
		TLSServerName: member.TLSServerName,
		Token:         tok.AccessToken,
		Expiration:    tok.Expiry, // the Google token's: the hub's may outlive it, and no longer matters
	}, nil
}

// check says what is wrong with the options, or with member.
func (f *federated) check(member federation.Member) error {
	switch a := f.opts.Audience; {
	case a == "":
		return errors.New("gke: FederatedOptions.Audience is required: the workload identity pool provider, //iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER")
	case !strings.HasPrefix(a, "//"):
		return fmt.Errorf("gke: FederatedOptions.Audience %q is not a pool provider's full resource name (//iam.googleapis.com/projects/…/providers/…); the hub's tokens are minted for AllowedAudience of it", a)
	case f.opts.ServiceAccount != "" && !strings.Contains(f.opts.ServiceAccount, "@"):
		return fmt.Errorf("gke: FederatedOptions.ServiceAccount %q is not a service account's email", f.opts.ServiceAccount)
	case member.Server == "":
		return errors.New("gke: the member's Server is empty")
	}
	return nil
}

// from names the identity in logs and errors: the pool provider, and the
// service account impersonated.
func (f *federated) from() string {
	s := "pool provider " + quote(f.opts.Audience)
	if f.opts.ServiceAccount != "" {
		s += " as service account " + quote(f.opts.ServiceAccount)
	}
	return s
}

// supplier hands the hub's token to the exchange.
type supplier struct{ token federation.Token }

func (s supplier) SubjectToken(context.Context, externalaccount.SupplierOptions) (string, error) {
	return s.token.Value(), nil
}
