package eks

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/go-logr/logr"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// SessionName is the role session name of the roles that Options.RoleARN
// makes the handler assume, and of those FederatedOptions.RoleARN and
// ChainRoleARN name; it shows in CloudTrail and in the assumed-role ARN the
// API server maps to a user.
const SessionName = "authvault"

// Options say which cluster to log in to and as whom.
type Options struct {
	// Cluster is the cluster's name (aws-iam-authenticator's cluster ID),
	// signed into every token. Required.
	Cluster string

	// Region is the AWS region of STS. Default: the region of AWS, else the
	// SDK's (AWS_REGION, the profile's region).
	Region string

	// RoleARN, when set, is a role to assume with STS AssumeRole before each
	// token is made: the token then speaks for the role. Default: none, the
	// token speaks for the credentials themselves.
	RoleARN string

	// STSEndpoint is the STS endpoint to presign for and to assume RoleARN
	// at (a VPC endpoint, a FIPS one), as an absolute URL. Default: the SDK's
	// regional endpoint, https://sts.<region>.amazonaws.com.
	STSEndpoint string

	// Server is the API server's URL, and CAData the PEM of its certificate
	// authority (nil: the system's roots). Default: both from EKS
	// DescribeCluster at every login, with the credentials that sign the
	// token (the role's, with RoleARN), which then need
	// eks:DescribeCluster; CAData is then ignored.
	Server string
	CAData []byte

	// CheckServer, with Server set, makes every login ask DescribeCluster
	// too and refuse (a permanent error, no token made) a Server that is not
	// the cluster's endpoint; the CA is then DescribeCluster's, not CAData.
	// For a Server someone else chose (a kubeconfig in a Secret): the token
	// is a credential for the cluster, replayable wherever it is sent.
	// Default: false, Server is trusted as given.
	CheckServer bool

	// EKSEndpoint is the EKS API endpoint DescribeCluster is sent to, as an
	// absolute URL. Default: the SDK's regional endpoint.
	EKSEndpoint string

	// AWS is the SDK configuration to take credentials, HTTP client and
	// region from. Default: config.LoadDefaultConfig with Region, loaded at
	// the first login and kept (with the SDK's credential cache) for the
	// next ones; the SDK's own log lines then go to the logger in the
	// login's context. A configuration given here keeps its Logger, which
	// LoadDefaultConfig points at stderr unless told otherwise
	// (config.WithLogger).
	AWS *aws.Config
}

// Login returns a handler that makes an EKS token for opts.Cluster at every
// login; see the package documentation for the token, its expiration and the
// credentials. Its logins may run concurrently: they take turns. It is
// named "eks <cluster> (<region>)", without the region when Options has
// none; its metric label is "eks".
func Login(opts Options) login.Handler {
	h := &handler{opts: opts, turn: make(chan struct{}, 1)}
	name := "eks " + opts.Cluster
	if opts.Region != "" {
		name += " (" + opts.Region + ")"
	}
	return login.Named(name, "eks", h.login)
}

// handler is one Login's state.
type handler struct {
	opts Options

	// turn is held (a value sent) by the login that runs; a login waiting
	// for its turn leaves when its context ends, as a mutex would not let it.
	// Methods named …Locked expect it held.
	turn chan struct{}

	// profile is the shared config's profile to load, when a kubeconfig's
	// plugin names one (see Native); empty: the SDK's own choice.
	profile string
	// shared, for Native's logins, holds the SDK configurations they
	// share; nil: this handler loads its own.
	shared *sharedConfigs

	// Loaded by the first successful login, read by the later ones; only the
	// login holding turn touches them.
	cfg    *aws.Config
	source string // where cfg's credentials come from, for errors
}

// login is the handler Login returns.
func (h *handler) login(ctx context.Context) (*login.ConnectionInfo, error) {
	if err := h.opts.check(); err != nil {
		return nil, login.Permanent(err)
	}
	select {
	case h.turn <- struct{}{}:
		defer func() { <-h.turn }()
	case <-ctx.Done():
		return nil, h.errorf("waiting for another login: %w", ctx.Err())
	}
	if err := h.loadLocked(ctx); err != nil {
		return nil, err
	}
	cfg := *h.cfg
	if cfg.Region == "" {
		return nil, login.Permanent(h.errorf("no AWS region: set Options.Region or AWS_REGION"))
	}

	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, h.errorf("credentials from %s: %w", h.source, redact.Secrets(err))
	}
	who := "credentials from " + h.source
	if h.opts.RoleARN != "" {
		creds, err = h.assume(ctx, cfg, creds)
		if err != nil {
			return nil, err
		}
		who = fmt.Sprintf("role %q assumed with credentials from %s", h.opts.RoleARN, h.source)
	}

	ep := endpoint{server: h.opts.Server, caData: h.opts.CAData}
	if ep.server == "" || h.opts.CheckServer {
		if ep, err = h.describe(ctx, cfg, creds, who); err != nil {
			return nil, err
		}
		if h.opts.Server != "" && !sameServer(h.opts.Server, ep.server) {
			return nil, login.Permanent(h.errorf("server %s is not the cluster's endpoint %s (DescribeCluster): no token sent",
				redact.Value(h.opts.Server), ep.server))
		}
	}
	tok, err := presign(ctx, h.stsClient(cfg, creds), h.opts.Cluster)
	if err != nil {
		return nil, h.errorf("%s: presigning GetCallerIdentity: %w", who, redact.Secrets(err, creds.SecretAccessKey, creds.SessionToken))
	}
	exp := tok.expiration(creds)
	logr.FromContextOrDiscard(ctx).V(1).Info("eks: token made", "cluster", h.opts.Cluster, "region", cfg.Region,
		"server", ep.server, "credentials", who, "sdkSource", creds.Source, "signed", tok.signed, "expiration", exp)
	return &login.ConnectionInfo{
		Server:     ep.server,
		CAData:     ep.caData,
		Token:      tok.token,
		Expiration: exp,
	}, nil
}

// check tells what Options lacks.
func (o Options) check() error {
	if o.Cluster == "" {
		return errors.New("eks: Options.Cluster is required")
	}
	return nil
}

// loadLocked loads the SDK configuration at the first login, or after a login
// that could not load it.
func (h *handler) loadLocked(ctx context.Context) error {
	if h.cfg != nil {
		return nil
	}
	if h.opts.AWS != nil {
		cfg := h.opts.AWS.Copy()
		if h.opts.Region != "" {
			cfg.Region = h.opts.Region
		}
		if cfg.Credentials == nil {
			return login.Permanent(h.errorf("Options.AWS has no credentials provider"))
		}
		h.cfg, h.source = &cfg, "Options.AWS"
		return nil
	}
	load := loadDefault
	if h.shared != nil {
		load = h.shared.load
	}
	cfg, source, err := load(ctx, h.opts.Region, h.profile)
	if err != nil {
		return h.errorf("loading the AWS config (credentials from %s): %w", source, redact.Secrets(err))
	}
	h.cfg, h.source = cfg, source
	return nil
}

// loadDefault loads the SDK's default configuration, in region and profile
// when they are set, and names where its credentials come from.
func loadDefault(ctx context.Context, region, profile string) (*aws.Config, string, error) {
	load := []func(*config.LoadOptions) error{config.WithLogger(sdkLogger{log: logr.FromContextOrDiscard(ctx)})}
	if region != "" {
		load = append(load, config.WithRegion(region))
	}
	source := defaultChainSource(envLookup)
	if profile != "" {
		// A kubeconfig's plugin named the profile (see Native).
		load = append(load, config.WithSharedConfigProfile(profile))
		source = fmt.Sprintf("the shared config (profile %q)", profile)
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, source, err
	}
	return &cfg, source, nil
}

// assume assumes Options.RoleARN with base, the credentials of the chain.
func (h *handler) assume(ctx context.Context, cfg aws.Config, base aws.Credentials) (aws.Credentials, error) {
	p := stscreds.NewAssumeRoleProvider(h.stsClient(cfg, base), h.opts.RoleARN, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = SessionName
	})
	creds, err := p.Retrieve(ctx)
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil && !errors.Is(err, ctxErr) {
		// The SDK can read an answer the cancel cut short as one without
		// credentials: the cancel is what ended the login.
		err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	if err != nil {
		return aws.Credentials{}, h.errorf("assuming role %q with credentials from %s: %w",
			h.opts.RoleARN, h.source, redact.Secrets(err, base.SecretAccessKey, base.SessionToken))
	}
	return creds, nil
}

// stsClient is an STS client for cfg that signs with creds, at
// Options.STSEndpoint when one is set.
func (h *handler) stsClient(cfg aws.Config, creds aws.Credentials) *sts.Client {
	return sts.NewFromConfig(cfg, func(o *sts.Options) {
		o.Credentials = credentials.StaticCredentialsProvider{Value: creds}
		if h.opts.STSEndpoint != "" {
			o.BaseEndpoint = aws.String(h.opts.STSEndpoint)
		}
	})
}

// errorf is an error that starts with the package and the cluster.
func (h *handler) errorf(format string, args ...any) error {
	return fmt.Errorf("eks: cluster %q: "+format, append([]any{h.opts.Cluster}, args...)...)
}
