package addonauth

import (
	"errors"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configure an Authenticator. Zero values get the defaults given in
// each comment; a negative duration means none.
type Options struct {
	// Audience is what a token must be meant for: this service, as its
	// callers ask for it in their TokenRequest (for example
	// "dashboard.kube-system.svc"). Required, unless Audiences is set.
	Audience string
	// Audiences are more names the service goes by: a token meant for any
	// of them, or for Audience, is accepted (its aud claim holds one; the
	// TokenReview asks with them all). Default: Audience alone.
	Audiences []string

	// Config reaches the API server for the issuer's keys and the reviews,
	// typically a vault's RESTConfig. Required. Its QPS and Burst are used
	// when set; when both are zero they are 100 and 200 rather than
	// client-go's 5 and 10, which made reviews queue behind each other.
	// Set both or neither: a zero QPS beside a Burst is client-go's 5.
	Config *rest.Config

	// NoReview turns TokenReview off: tokens are verified locally only,
	// and a revoked one is accepted until it expires. A token of the
	// cluster's key whose issuer discovery does not name fetches it again
	// at once (a new issuer), and is refused when a fetch later than the
	// token does not name it either (the old issuer's tokens, for a
	// process started after a change); 503 until then. Default: reviews on.
	NoReview bool

	// ReviewForeign sends tokens that are not JWTs of the API server's
	// service-account issuer (webhook tokens, OIDC tokens of another
	// issuer) to TokenReview instead of refusing them. Then garbage costs
	// a TokenReview too, and distinct garbage tokens fill the cache (each
	// refusal is cached for FailureTTL), pushing out good verdicts and
	// their stale-if-error cover: turn it on only where callers bring such
	// tokens. A foreign token that is a JWT is never served past its exp
	// claim. Default: refused.
	ReviewForeign bool

	// SuccessTTL is how long a successful review is trusted, and how often
	// a long request is reviewed again: how long a revoked token keeps
	// access at most. Default: 10 s; negative: none, every request is
	// reviewed, and a long one again every second.
	SuccessTTL time.Duration
	// FailureTTL is how long a refused token is refused without asking
	// again. Default: 10 s.
	FailureTTL time.Duration
	// StaleIfError is how old a token's last successful review may be for
	// the token to be accepted while the API server cannot be reached.
	// Default: 5 min; negative: none, every token gets 503 then.
	StaleIfError time.Duration
	// ReviewTimeout bounds one TokenReview. Default: 5 s.
	ReviewTimeout time.Duration
	// StaleWait is how long a request waits for its token's review when
	// the token's last verdict has lapsed but could serve it (StaleIfError):
	// past it, the request is served from that verdict and the review goes
	// on, its answer (a revocation too) kept for the next requests. A
	// healthy API server answers within it, so a revocation is seen at
	// once. Default: 300 ms; negative: none, served at once.
	StaleWait time.Duration
	// CacheSize bounds the tokens whose reviews are remembered. Default:
	// 10,000.
	CacheSize int

	// Leeway is the clock skew allowed on exp and nbf. Default: 10 s.
	Leeway time.Duration
	// KeyRefetchInterval is the least time between two fetches of the
	// issuer's keys for an unknown key id. Default: 10 s.
	KeyRefetchInterval time.Duration

	// Headers name the identity headers set on forwarded requests.
	// Default: X-Authenticated-User, X-Authenticated-Groups,
	// X-Authenticated-UID and X-Authenticated-Extra-; RequestHeaders gives
	// those of the API server's requestheader authenticator.
	Headers Headers

	// RatePerUser is each user's sustained request rate, and BurstPerUser
	// the size of its bucket. Default: no limit; burst: RatePerUser, at
	// least 1.
	RatePerUser  rate.Limit
	BurstPerUser int
	// MaxUsers bounds the users whose buckets are kept. Default: 10,000.
	MaxUsers int

	// MaxRequestDuration ends every request after this long, whatever its
	// token. Default: 1 h; negative: none, a request ends with its token.
	MaxRequestDuration time.Duration

	// AllowPaths, when set, are the only paths served: a request for any
	// other gets 404 before its caller is verified. IgnorePaths are served
	// without verification (health checks, public assets): no token is
	// needed there, and no identity is set, though every incoming one is
	// still removed. Both hold path.Match patterns ("/metrics",
	// "/static/*"), matched against the decoded path, only when it is one
	// every upstream reads the same (see Authorization): no
	// "/static/..;/admin" is ignored. With both set, an ignored path must
	// be allowed too. Default: none.
	AllowPaths, IgnorePaths []string

	// Authorization, when set, also asks the API server whether each
	// caller may make its request (SubjectAccessReview); one that may not
	// gets 403. So does one that carries a method override (unless
	// Resource fixes the verb) and, when the path is reviewed (Resource
	// nil), one whose path some upstream would read as another (see the
	// package doc).
	// Default: none: the pattern keeps authorization apart, and the service
	// sees the caller's groups.
	Authorization *Authorization

	// FrontProxy, when set, also trusts the callers the API server's
	// aggregation layer forwards (see FrontProxy): a person behind kubectl
	// proxy, for a service registered as an APIService. Its configuration
	// is followed while Start runs. Default: bearer callers only.
	FrontProxy *FrontProxy

	// TrustedOrigins are origins (scheme://host[:port]) whose pages may, as
	// well as the service's own, make a browser send it an unsafe request,
	// open a WebSocket to it or read its answers (its CORS headers are
	// kept for them): such a request from any other page gets 403, or its
	// answer without CORS headers, since the browser sends it with the
	// person's identity (see the package doc's Browsers). A browser app of
	// another origin that brings its own bearer token needs its origin
	// here too; programs send no Origin and are not affected. Written as
	// browsers send them once New has read them. Default: none.
	TrustedOrigins []string
	// TrustedOriginsSetting says where the service's operator sets
	// TrustedOrigins, on the 403 page a person gets for a cross-origin
	// request ("addon-proxy --trusted-origins"). Default: "the service's
	// addonauth.Options.TrustedOrigins".
	TrustedOriginsSetting string

	// Logger receives refusals (each at V(1), with the caller's user when it
	// was verified; at INFO, a burst of them as one line at once, and its
	// count with the first refusal a minute or more later) and failures to
	// verify, never a token. Default: discard.
	Logger logr.Logger
	// Registerer receives the metrics (addonauth_*). Default: none.
	Registerer prometheus.Registerer

	// now is the clock; tests set it.
	now func() time.Time
	// frontProxyClient reads the ConfigMap instead of Config; tests set it.
	frontProxyClient kubernetes.Interface
}

// Headers name the identity headers.
type Headers struct {
	User, Groups, UID string
	// Extra is the prefix of the headers that carry the caller's extra
	// attributes, one header per key (percent-escaped, as the API server's
	// aggregation layer escapes them) and value. Empty: none are set.
	Extra string
}

// RequestHeaders are the names kube-apiserver's requestheader
// authenticator reads (--requestheader-username-headers and so on).
var RequestHeaders = Headers{User: "X-Remote-User", Groups: "X-Remote-Group", UID: "X-Remote-Uid", Extra: "X-Remote-Extra-"}

// defaultHeaders are the names the proposal gives.
var defaultHeaders = Headers{User: "X-Authenticated-User", Groups: "X-Authenticated-Groups", UID: "X-Authenticated-UID", Extra: "X-Authenticated-Extra-"}

func (o Options) withDefaults() (Options, error) {
	// Audiences holds them all from here on, Audience first; Audience is
	// the one WWW-Authenticate names.
	var all []string
	for _, aud := range append([]string{o.Audience}, o.Audiences...) {
		if aud != "" && !slices.Contains(all, aud) {
			all = append(all, aud)
		}
	}
	switch {
	case len(all) == 0:
		return o, errors.New("addonauth: Options.Audience is required: the audience tokens must be meant for")
	case slices.Contains(o.Audiences, ""):
		return o, errors.New("addonauth: Options.Audiences holds an empty audience")
	}
	o.Audience, o.Audiences = all[0], all
	if err := checkPathPatterns("AllowPaths", o.AllowPaths); err != nil {
		return o, err
	}
	if err := checkPathPatterns("IgnorePaths", o.IgnorePaths); err != nil {
		return o, err
	}
	var err error
	if o.TrustedOrigins, err = normalizeOrigins(o.TrustedOrigins); err != nil {
		return o, err
	}
	if o.TrustedOriginsSetting == "" {
		o.TrustedOriginsSetting = "the service's addonauth.Options.TrustedOrigins"
	}
	if o.Config == nil {
		return o, errors.New("addonauth: Options.Config is required: the API server to verify tokens with")
	}
	o.SuccessTTL = defaulted(o.SuccessTTL, 10*time.Second)
	o.FailureTTL = defaulted(o.FailureTTL, 10*time.Second)
	o.StaleIfError = defaulted(o.StaleIfError, 5*time.Minute)
	o.ReviewTimeout = defaulted(o.ReviewTimeout, 5*time.Second)
	o.StaleWait = defaulted(o.StaleWait, 300*time.Millisecond)
	o.Leeway = defaulted(o.Leeway, 10*time.Second)
	o.KeyRefetchInterval = defaulted(o.KeyRefetchInterval, 10*time.Second)
	o.MaxRequestDuration = defaulted(o.MaxRequestDuration, time.Hour)
	if o.CacheSize <= 0 {
		o.CacheSize = 10_000
	}
	if o.MaxUsers <= 0 {
		o.MaxUsers = 10_000
	}
	if o.BurstPerUser <= 0 {
		o.BurstPerUser = max(1, int(o.RatePerUser))
	}
	if o.Headers == (Headers{}) {
		o.Headers = defaultHeaders
	}
	if o.Headers.User == "" || o.Headers.Groups == "" || o.Headers.UID == "" {
		return o, errors.New("addonauth: Options.Headers must name all three headers, or none")
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o, nil
}

// defaulted is d when v is zero, and zero (none) when v is negative.
func defaulted(v, d time.Duration) time.Duration {
	switch {
	case v == 0:
		return d
	case v < 0:
		return 0
	}
	return v
}
