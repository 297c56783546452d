package eks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// FederatedAudience is the audience AWS STS expects of a web identity token by
// default: the client ID an IAM OIDC identity provider lists. Mint the
// hub's tokens for it (federation.Config.Audiences), unless the account's
// OIDC provider for the hub lists another.
const FederatedAudience = "sts.amazonaws.com"

// FederatedOptions say which EKS cluster a member is and which roles the
// hub's token becomes.
type FederatedOptions struct {
	// Cluster is the member's EKS cluster name, signed into every token.
	// Required.
	Cluster string

	// Region is the AWS region of STS. Default: the region of AWS, else
	// the SDK's (AWS_REGION, the profile's region).
	Region string

	// RoleARN is the IAM role the hub's token is exchanged for, with STS
	// AssumeRoleWithWebIdentity (session name SessionName): its trust
	// policy allows the account's IAM OIDC provider for the hub's issuer.
	// Required.
	RoleARN string

	// ChainRoleARN, when set, is a role that RoleARN's session then
	// assumes with STS AssumeRole (session name SessionName): the token
	// speaks for it, and its trust policy allows RoleARN. Default: none,
	// the token speaks for RoleARN.
	ChainRoleARN string

	// STSEndpoint is the STS endpoint to exchange the token at, assume
	// ChainRoleARN at and presign for (a VPC endpoint, a FIPS one), as an
	// absolute URL. Default: the SDK's regional endpoint.
	STSEndpoint string

	// AWS is the SDK configuration to take the HTTP client, the retryer
	// and the region from; its credentials are never used. Default:
	// config.LoadDefaultConfig with Region, loaded at the first exchange
	// and kept, whose SDK log lines go to the logger in the login's
	// context.
	AWS *aws.Config
}

// Federated returns the federation provider of an EKS member: it
// exchanges the hub's token for RoleARN's credentials (STS
// AssumeRoleWithWebIdentity), assumes ChainRoleARN with them when set,
// and gives the EKS token they sign (as Login makes it) for the member's
// server and CA. A role STS refuses the hub's token for (an invalid or
// expired token, an audience or issuer the account does not trust, a
// subject the role does not allow) is an error that wraps
// federation.ErrRejected and says STS's code. It may be called
// concurrently; each call exchanges its token anew.
func Federated(opts FederatedOptions) federation.Provider {
	return &federated{opts: opts, defaults: &defaultConfig{}}
}

// federated is a Federated provider.
type federated struct {
	opts     FederatedOptions
	defaults *defaultConfig // without opts.AWS; shared by the providers Flux makes
}

// defaultConfig is the SDK's default configuration, loaded at the first
// exchange that needs it and kept.
type defaultConfig struct {
	mu     sync.Mutex  // guards loaded
	loaded *aws.Config // nil until loaded
}

// get is a copy of the default configuration, loaded now if it is not yet.
func (d *defaultConfig) get(ctx context.Context, cluster string) (aws.Config, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loaded == nil {
		cfg, _, err := loadDefault(ctx, "", "")
		if err != nil {
			return aws.Config{}, fmt.Errorf("eks: cluster %q: loading the AWS config: %w", cluster, redact.Secrets(err))
		}
		d.loaded = cfg
	}
	return d.loaded.Copy(), nil
}

// Credential is the federation.Provider method.
func (f *federated) Credential(ctx context.Context, token federation.Token, member federation.Member) (*login.ConnectionInfo, error) {
	if err := f.opts.check(member); err != nil {
		return nil, login.Permanent(err)
	}
	cfg, err := f.config(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		return nil, login.Permanent(fmt.Errorf("eks: cluster %q: no AWS region: set FederatedOptions.Region or AWS_REGION", f.opts.Cluster))
	}

	exchange := f.exchange(cfg, token)
	var (
		// Written by the credentials provider, which the handler's login
		// calls on this goroutine.
		web     aws.Credentials
		refusal error
	)
	cfg.Credentials = aws.CredentialsProviderFunc(func(ctx context.Context) (aws.Credentials, error) {
		creds, err := exchange.Retrieve(ctx)
		if err != nil {
			err = redact.Secrets(err, token.Value())
			refusal = f.refused(err, token.Value())
			return aws.Credentials{}, err
		}
		web = creds
		return creds, nil
	})
	h := &handler{
		opts: Options{
			Cluster: f.opts.Cluster, Region: cfg.Region, RoleARN: f.opts.ChainRoleARN, STSEndpoint: f.opts.STSEndpoint,
			Server: member.Server, CAData: member.CAData,
		},
		turn:   make(chan struct{}, 1),
		cfg:    &cfg,
		source: fmt.Sprintf("the hub's token for role %q (AssumeRoleWithWebIdentity)", f.opts.RoleARN),
	}
	info, err := h.login(ctx)
	switch {
	case refusal != nil:
		return nil, refusal
	case err != nil:
		return nil, err
	}
	// A chained session outlives the one that assumed it on AWS's side,
	// but it is not worth the doubt: the vault logs in again sooner.
	if web.CanExpire && !web.Expires.IsZero() && web.Expires.Before(info.Expiration) {
		info.Expiration = web.Expires
	}
	info.CAPath, info.TLSServerName = member.CAPath, member.TLSServerName
	return info, nil
}

// check tells what the options lack for member.
func (o FederatedOptions) check(member federation.Member) error {
	switch {
	case o.Cluster == "":
		return errors.New("eks: FederatedOptions.Cluster is required: the member's EKS cluster name")
	case o.RoleARN == "":
		return fmt.Errorf("eks: cluster %q: FederatedOptions.RoleARN is required: the role the hub's token is exchanged for", o.Cluster)
	case member.Server == "":
		return fmt.Errorf("eks: cluster %q: the member has no server: the token goes only to federation.Member.Server", o.Cluster)
	}
	return nil
}

// config is a copy of the SDK configuration to exchange with: Options.AWS,
// or the default one, loaded at the first call that loads it.
func (f *federated) config(ctx context.Context) (aws.Config, error) {
	cfg := aws.Config{}
	if f.opts.AWS != nil {
		cfg = f.opts.AWS.Copy()
	} else {
		var err error
		if cfg, err = f.defaults.get(ctx, f.opts.Cluster); err != nil {
			return aws.Config{}, err
		}
	}
	if f.opts.Region != "" {
		cfg.Region = f.opts.Region
	}
	return cfg, nil
}

// exchange is the SDK's web identity provider of RoleARN for token, at
// STSEndpoint when one is set.
func (f *federated) exchange(cfg aws.Config, token federation.Token) *stscreds.WebIdentityRoleProvider {
	client := sts.NewFromConfig(cfg, func(o *sts.Options) {
		o.Credentials = nil // the call is not signed: the token is the proof
		if f.opts.STSEndpoint != "" {
			o.BaseEndpoint = aws.String(f.opts.STSEndpoint)
		}
	})
	return stscreds.NewWebIdentityRoleProvider(client, f.opts.RoleARN, hubToken{token}, func(o *stscreds.WebIdentityRoleOptions) {
		o.RoleSessionName = SessionName
	})
}

// hubToken gives the SDK the hub's token, as a token file would.
type hubToken struct{ token federation.Token }

// GetIdentityToken is the stscreds.IdentityTokenRetriever method.
func (t hubToken) GetIdentityToken() ([]byte, error) { return []byte(t.token.Value()), nil }

// rejections are STS's codes for a web identity token it does not take:
// not valid (its signature, issuer or audience), expired, refused by the
// identity provider, not allowed by the role's trust policy (its subject,
// its audience), or its issuer's keys out of STS's reach.
var rejections = []string{"InvalidIdentityToken", "ExpiredTokenException", "IDPRejectedClaim", "AccessDenied", "IDPCommunicationError"}

// refused is the error for err, AssumeRoleWithWebIdentity's, when STS
// refused the token; nil otherwise. STS's message is quoted without token.
func (f *federated) refused(err error, token string) error {
	apiErr, ok := errors.AsType[smithy.APIError](err)
	if !ok || !slices.Contains(rejections, apiErr.ErrorCode()) {
		return nil
	}
	return &rejectedError{
		msg: fmt.Sprintf("eks: cluster %q: AWS STS refused the hub's token for role %q (AssumeRoleWithWebIdentity): %s: %s",
			f.opts.Cluster, f.opts.RoleARN, apiErr.ErrorCode(), redact.URL(redact.Mask(apiErr.ErrorMessage(), token))),
		err: err,
	}
}

// rejectedError is STS's refusal of the hub's token: federation.ErrRejected
// to errors.Is, and the SDK's error (redacted) to errors.As.
type rejectedError struct {
	msg string
	err error
}

func (e *rejectedError) Error() string   { return e.msg }
func (e *rejectedError) Unwrap() []error { return []error{federation.ErrRejected, e.err} }

// Format prints Error's text for every verb: %#v would print the SDK's
// error as it is.
func (e *rejectedError) Format(f fmt.State, verb rune) { redact.Print(f, verb, e.msg) }
