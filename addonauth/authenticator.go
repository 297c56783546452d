package addonauth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Authenticator verifies the callers of a service. Create it with New; it
// is safe for concurrent use and starts no goroutine of its own, but in
// Start (which follows a FrontProxy's configuration).
type Authenticator struct {
	opts          Options
	identityNames []string // see isIdentityHeader
	keys          *keySet
	reviewer      *reviewer   // reviews, and caches verdicts by a hash of the token
	limits        *limiters   // nil without a rate
	authz         *authorizer // nil without Options.Authorization
	front         *frontProxy // nil without Options.FrontProxy
	origins       *originCheck
	metrics       *metrics
	refusals      refusalLog
	crossOrigins  refusalLog // apart: a person's refused page is news, whatever callers were refused before
}

// New checks opts and makes an Authenticator. It does not reach the API
// server: the issuer's keys are fetched with the first token, and a front
// proxy's configuration by Start.
func New(opts Options) (*Authenticator, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(opts.Config)
	if cfg.QPS == 0 && cfg.Burst == 0 {
		cfg.QPS, cfg.Burst = 100, 200
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("addonauth: a client for Options.Config: %w", err)
	}
	a := &Authenticator{
		crossOrigins:  refusalLog{msg: "cross-origin requests from browsers refused (each one logged at V(1); this line at most once a minute)"},
		opts:          opts,
		identityNames: identityNames(opts.Headers),
		keys: &keySet{client: cs.Discovery().RESTClient(), interval: opts.KeyRefetchInterval, timeout: fetchTimeout,
			now: opts.now, log: opts.Logger},
		metrics: newMetrics(),
	}
	if a.origins, err = newOriginCheck(opts.TrustedOrigins, opts.TrustedOriginsSetting); err != nil {
		return nil, err
	}
	a.limits = newLimiters(&a.opts)
	a.authz = newAuthorizer(cs.AuthorizationV1().SubjectAccessReviews(), &a.opts)
	a.reviewer = newReviewer(cs.AuthenticationV1().TokenReviews(), &a.opts, a.metrics)
	if opts.FrontProxy != nil {
		var client kubernetes.Interface = cs
		if opts.frontProxyClient != nil {
			client = opts.frontProxyClient
		}
		if a.front, err = newFrontProxy(*opts.FrontProxy, client, opts.Logger.WithName("front-proxy")); err != nil {
			return nil, err
		}
		a.front.now = opts.now
	}
	if err := a.metrics.register(opts.Registerer); err != nil {
		return nil, err
	}
	return a, nil
}

// Authenticate returns the user token belongs to, as the middleware does
// for each request: the local check, then (unless NoReview) a TokenReview,
// from the cache while it is fresh. Its errors name the reason, never the
// token. The User is the caller's own: the cache keeps another copy.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (User, error) {
	u, err := a.authenticate(ctx, token)
	return u.clone(), err
}

// Start follows Options.FrontProxy's configuration (the API server's
// ConfigMap, or the CA file) until ctx ends; until it has read it, front
// proxies' callers get 503. It returns nil when ctx ends, and at once
// without a FrontProxy; it may run once. An Authenticator is a
// controller-runtime Runnable: mgr.Add(a) runs it.
func (a *Authenticator) Start(ctx context.Context) error {
	if a.front == nil {
		return nil
	}
	if !a.front.started.CompareAndSwap(false, true) {
		return errors.New("addonauth: Authenticator.Start runs once")
	}
	a.front.run(ctx)
	return nil
}

func (a *Authenticator) authenticate(ctx context.Context, token string) (User, error) {
	if len(token) > maxTokenBytes {
		return User{}, errTooLong
	}
	// The API server reads a token as from "Authorization: Bearer
	// <token>": trimmed, and up to its first space. One it would read
	// otherwise is not the token the local check saw: "<token> x" would
	// pass as the token without its checks, and an empty one is a 400
	// (an outage, to the circuit).
	switch {
	case token == "":
		return User{}, errMissing
	case strings.ContainsFunc(token, unicode.IsSpace):
		return User{}, errSpace
	}
	// A fresh verdict needs no signature check: the token was verified
	// when it was given.
	if v, ok := a.reviewer.cached(token); ok {
		return v.user, v.err
	}
	local, from, err := a.verifyLocal(ctx, token)
	switch {
	case err == nil && from == fromKey && a.opts.NoReview:
		return User{}, errUnknownIssuer // nothing can vouch for its issuer
	case err == nil && a.opts.NoReview:
		a.reviewer.remember(token, local)
		return local, nil
	case err == nil:
		return a.reviewer.review(ctx, token, local)
	case from == foreign && a.opts.ReviewForeign && !a.opts.NoReview:
		// Its exp, if it is a JWT, is unverified: it may end access
		// sooner, never extend it.
		exp := foreignExpiry(token)
		if !exp.IsZero() && !a.opts.now().Before(exp) {
			return User{}, errExpired
		}
		return a.reviewer.review(ctx, token, User{Expires: exp})
	case errors.Is(err, errKeysUnavailable), errors.Is(err, errIssuerUnsettled):
		return User{}, fmt.Errorf("%w: %w", errUnavailable, err)
	default:
		return User{}, err
	}
}
