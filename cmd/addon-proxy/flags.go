package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/internal/weborigin"
)

type config struct {
	version                              bool // print it, and nothing else
	verbosity                            int  // -v: 1 logs each refused caller
	listen, opsListen, certFile, keyFile string
	tlsMinVersion                        uint16   // the least served; VersionTLS12 by default
	tlsCiphers                           []uint16 // TLS 1.2's served; nil: Go's
	upstream                             *url.URL
	upstreamCAFile                       string
	upstreamCertFile, upstreamKeyFile    string
	upstreamH2C                          bool
	shutdownGrace, verifyTimeout         time.Duration
	auth                                 addonauth.Options
	apiQPS                               float64
	apiBurst                             int
	apiService                           schema.GroupVersion // empty: not an APIService's backend
	trustedOrigins                       []string            // as browsers spell them; also in auth
}

// parseFlags defines the flags on fs and parses args. The vault's
// fallback reads --kubeconfig from the command line's flags.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var (
		c                         config
		upstream                  string
		requestHeaders, authorize bool
		authorizeResource         string
		ratePerUser               float64
		tlsMinVersion             string
		tlsCiphers                []string
		apiService                string
		frontProxy                addonauth.FrontProxy
		skipLookup                bool
	)
	if fs.Lookup("kubeconfig") == nil {
		fs.String("kubeconfig", "", "a kubeconfig to log in with (default: the pod's ServiceAccount, $KUBECONFIG, ~/.kube/config)")
	}
	fs.StringVar(&c.listen, "listen", ":8443", "address to serve the callers on (TLS with --tls-cert-file and --tls-key-file, plain HTTP without)")
	fs.StringVar(&c.opsListen, "ops-listen", ":9090", "address of /healthz, /readyz and /metrics (\"0\": off)")
	fs.StringVar(&upstream, "upstream", "", "the service's URL, on localhost (required), e.g. http://127.0.0.1:8080")
	fs.StringVar(&c.upstreamCAFile, "upstream-ca-file", "", "CA bundle (PEM) that signs an https upstream's certificate, instead of the system's")
	fs.BoolVar(&c.upstreamH2C, "upstream-force-h2c", false, "speak HTTP/2 without TLS (h2c, prior knowledge) to an http:// upstream that speaks only that, as gRPC servers without TLS")
	fs.Var((*list)(&c.auth.Audiences), "audience", "an audience callers' tokens may name: the service's name (required; repeat it or separate with commas for several, any of which will do)")
	fs.StringVar(&c.certFile, "tls-cert-file", "", "serving certificate (PEM), reread when it changes; with --tls-key-file")
	fs.StringVar(&c.keyFile, "tls-key-file", "", "serving key (PEM), reread when it changes")
	fs.StringVar(&tlsMinVersion, "tls-min-version", "", "the oldest TLS version served, VersionTLS12 or VersionTLS13 (default VersionTLS12)")
	fs.Var((*list)(&tlsCiphers), "tls-cipher-suites", "the TLS 1.2 cipher suites served, by IANA name (repeat or separate with commas; default: Go's; TLS 1.3's are Go's).\n"+
		"Preferred: "+strings.Join(tls12Only(cliflag.PreferredTLSCipherNames()), ", ")+".\nInsecure: "+strings.Join(tls12Only(cliflag.InsecureTLSCipherNames()), ", "))
	fs.StringVar(&c.upstreamCertFile, "upstream-client-cert-file", "", "client certificate (PEM) presented to an https upstream, reread when it changes; with --upstream-client-key-file")
	fs.StringVar(&c.upstreamKeyFile, "upstream-client-key-file", "", "key (PEM) of --upstream-client-cert-file, reread when it changes")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	fs.IntVar(&c.verbosity, "v", 0, "log verbosity, as Kubernetes components take it (client-go's lines too): 1 logs each refused caller (its user when known, and why; never a token; past 100 lines a second, one in 100); 0 logs a burst of refusals as one line at once and the count at most once a minute")
	fs.BoolVar(&c.auth.NoReview, "no-review", false, "verify tokens locally only: a revoked token keeps access until it expires")
	fs.BoolVar(&c.auth.ReviewForeign, "review-foreign", false, "send tokens of other issuers to TokenReview instead of refusing them")
	fs.DurationVar(&c.auth.SuccessTTL, "success-ttl", 0, "how long a successful review is trusted, and so how long a revoked token keeps access (default 10s; negative: none, every request is reviewed)")
	fs.DurationVar(&c.auth.FailureTTL, "failure-ttl", 0, "how long a refused token is refused without asking (default 10s; negative: none)")
	fs.DurationVar(&c.auth.StaleIfError, "stale-if-error", 0, "how old a successful review may be to serve while the API server is unreachable (default 5m; negative: none)")
	fs.DurationVar(&c.auth.StaleWait, "stale-wait", 0, "how long a request whose token has a review within --stale-if-error waits for its new review before it is served from the old one, the new one going on (default 300ms; negative: none, served at once)")
	fs.Float64Var(&c.apiQPS, "kube-api-qps", 100, "requests per second to the API server (TokenReviews and SubjectAccessReviews share them; negative: no limit; 0 is refused)")
	fs.IntVar(&c.apiBurst, "kube-api-burst", 200, "requests to the API server allowed in a burst above --kube-api-qps")
	fs.Float64Var(&ratePerUser, "rate-per-user", 0, "requests per second per user (default: no limit)")
	fs.IntVar(&c.auth.BurstPerUser, "burst-per-user", 0, "bucket size per user (default: the rate, at least 1)")
	fs.DurationVar(&c.auth.MaxRequestDuration, "max-request-duration", 0, "end every request after this long (default 1h; negative: none)")
	fs.DurationVar(&c.verifyTimeout, "verify-timeout", 30*time.Second, "how long a request may take to be verified (and authorized) before it is forwarded; its connection's reads end then, and it gets 503 (a request for an ignored path, with no verified caller, must also send its body within it)")
	fs.BoolVar(&requestHeaders, "requestheader-names", false, "on the way to the upstream, set X-Remote-User, X-Remote-Group, X-Remote-Uid and X-Remote-Extra-* instead of X-Authenticated-* (the --requestheader-*-headers flags name what a front proxy's requests are read from)")
	fs.BoolVar(&authorize, "authorize", false, "also require the caller to be allowed the request's path and verb (SubjectAccessReview, non-resource URL); paths some upstream would read as another path, and method overrides, get 403")
	fs.StringVar(&authorizeResource, "authorize-resource", "", "also require the caller to be allowed this resource (SubjectAccessReview; replaces --authorize),\n"+
		"with the request's verb (method overrides get 403) unless verb= is given:\n"+
		"namespace/resource[/subresource], or comma-separated key=value with keys namespace, group (or apiGroup), version (or apiVersion),\n"+
		"resource (required), subresource, name, verb; e.g. namespace=prod,group=apps,resource=deployments,subresource=scale,name=web")
	fs.Var((*list)(&c.auth.AllowPaths), "allow-paths", "path patterns (path.Match: /metrics, /api/*; * does not cross a /) that are the only ones served; others get 404 (repeat or separate with commas)")
	fs.Var((*list)(&c.auth.IgnorePaths), "ignore-paths", "path patterns served without verification, and without identity headers; with --allow-paths, they must be allowed too (repeat or separate with commas)")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 20*time.Second, "how long requests under way may finish on SIGTERM, then the rest are closed (below the pod's termination grace, 30s by default)")
	fs.StringVar(&apiService, "apiservice", "", "GROUP/VERSION: be the backend of that APIService, for callers the API server's aggregation layer forwards (a person behind kubectl proxy):\n"+
		"answers its discovery at /apis/GROUP/VERSION, forwards /apis/GROUP/VERSION/... to the upstream without that prefix, keeps redirects under it;\n"+
		"trusts the requestheader identity over the API server's front-proxy client certificate (needs --tls-cert-file and --tls-key-file)")
	fs.StringVar(&frontProxy.ClientCAFile, "requestheader-client-ca-file", "", "CA bundle (PEM) of the front proxy's client certificate, reread when it changes (default: from ConfigMap kube-system/extension-apiserver-authentication, followed live)")
	fs.Var((*list)(&frontProxy.AllowedNames), "requestheader-allowed-names", "common names the front proxy's certificate may have (empty: any of the CA); with --requestheader-client-ca-file")
	fs.Var((*list)(&frontProxy.UsernameHeaders), "requestheader-username-headers", "request headers to read the user name from (default X-Remote-User); with --requestheader-client-ca-file")
	fs.Var((*list)(&frontProxy.UIDHeaders), "requestheader-uid-headers", "request headers to read the UID from (default none); with --requestheader-client-ca-file")
	fs.Var((*list)(&frontProxy.GroupHeaders), "requestheader-group-headers", "request headers to read groups from (default X-Remote-Group); with --requestheader-client-ca-file")
	fs.Var((*list)(&frontProxy.ExtraHeaderPrefixes), "requestheader-extra-headers-prefix", "request header prefixes to read extra attributes from (default X-Remote-Extra-); with --requestheader-client-ca-file")
	fs.BoolVar(&skipLookup, "authentication-skip-lookup", false, "do not read the requestheader configuration from ConfigMap kube-system/extension-apiserver-authentication: --requestheader-client-ca-file must give it")
	c.trustedOrigins = []string{"http://localhost:8001", "http://127.0.0.1:8001"}
	fs.Var(&origins{list: &c.trustedOrigins}, "trusted-origins", "origins (scheme://host[:port]) whose pages may send unsafe requests (POST, PUT, PATCH, DELETE) to the service and open WebSockets to it; other cross-site ones get 403\n"+
		"(repeat or separate with commas; the default is the pages of kubectl proxy; \"\" for none)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.version {
		return c, nil
	}
	switch {
	case upstream == "":
		return c, errors.New("--upstream is required")
	case len(c.auth.Audiences) == 0:
		return c, errors.New("--audience is required")
	case (c.certFile == "") != (c.keyFile == ""):
		return c, errors.New("--tls-cert-file and --tls-key-file go together")
	case c.certFile == "" && tlsMinVersion != "":
		return c, errors.New("--tls-min-version needs --tls-cert-file and --tls-key-file: without them the callers are served plain HTTP")
	case c.certFile == "" && len(tlsCiphers) > 0:
		return c, errors.New("--tls-cipher-suites needs --tls-cert-file and --tls-key-file: without them the callers are served plain HTTP")
	case (c.upstreamCertFile == "") != (c.upstreamKeyFile == ""):
		return c, errors.New("--upstream-client-cert-file and --upstream-client-key-file go together")
	case c.apiQPS == 0:
		// client-go reads a zero rate as its default of 5 a second.
		return c, errors.New("--kube-api-qps must be positive, or negative for no limit")
	case c.apiQPS > 0 && c.apiBurst <= 0:
		return c, errors.New("--kube-api-burst must be positive when --kube-api-qps is")
	case c.verifyTimeout <= 0:
		return c, errors.New("--verify-timeout must be positive")
	}
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("--upstream %q is not an http:// or https:// URL", upstream)
	}
	c.upstream = u
	switch {
	case c.upstreamCAFile != "" && u.Scheme != "https":
		return c, errors.New("--upstream-ca-file needs an https:// --upstream")
	case c.upstreamH2C && u.Scheme != "http":
		return c, errors.New("--upstream-force-h2c needs an http:// --upstream")
	case c.upstreamCertFile != "" && u.Scheme != "https":
		return c, errors.New("--upstream-client-cert-file needs an https:// --upstream")
	}
	if c.verbosity < 0 || c.verbosity > 10 {
		return c, fmt.Errorf("-v=%d: a verbosity from 0 to 10", c.verbosity)
	}
	if c.tlsMinVersion, err = minVersion(tlsMinVersion); err != nil {
		return c, err
	}
	if c.tlsCiphers, err = cliflag.TLSCipherSuites(tlsCiphers); err != nil {
		return c, fmt.Errorf("--tls-cipher-suites: %w (the names are IANA's, as --help lists them)", err)
	}
	if only13 := slices.DeleteFunc(slices.Clone(tlsCiphers), func(n string) bool { return len(tls12Only([]string{n})) == 1 }); len(only13) > 0 && len(c.tlsCiphers) > 0 {
		return c, fmt.Errorf("--tls-cipher-suites: %s: a TLS 1.3 suite, which Go chooses by itself and no setting changes (name TLS 1.2 suites only)", strings.Join(only13, ", "))
	}
	// net/http's HTTP/2 refuses to serve without one of these, and the
	// server would fail only once it starts.
	if len(c.tlsCiphers) > 0 && c.tlsMinVersion < tls.VersionTLS13 &&
		!slices.Contains(c.tlsCiphers, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) && !slices.Contains(c.tlsCiphers, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) {
		return c, errors.New("--tls-cipher-suites must name TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 (for the key's type): HTTP/2 requires one")
	}
	c.auth.RatePerUser = rate.Limit(ratePerUser)
	switch {
	case authorizeResource != "":
		attrs, err := parseResource(authorizeResource)
		if err != nil {
			return c, fmt.Errorf("--authorize-resource %q: %w", authorizeResource, err)
		}
		c.auth.Authorization = &addonauth.Authorization{Resource: attrs}
	case authorize:
		c.auth.Authorization = &addonauth.Authorization{}
	}
	if requestHeaders {
		c.auth.Headers = addonauth.RequestHeaders
	}
	if err := c.frontProxy(apiService, frontProxy, skipLookup); err != nil {
		return c, err
	}
	if !c.apiService.Empty() && strings.Trim(c.upstream.Path, "/") != "" {
		return c, fmt.Errorf("--upstream %q: with --apiservice the upstream's paths start at /: a base path would be doubled in its redirects", upstream)
	}
	for i, o := range c.trustedOrigins {
		norm, err := weborigin.Normalize(o)
		if err != nil {
			return c, fmt.Errorf("--trusted-origins %q: %w", o, err)
		}
		c.trustedOrigins[i] = norm
	}
	c.auth.TrustedOrigins = c.trustedOrigins
	c.auth.TrustedOriginsSetting = "addon-proxy --trusted-origins (a comma-separated list)"
	return c, nil
}

// frontProxy reads --apiservice and the requestheader flags.
func (c *config) frontProxy(apiService string, fp addonauth.FrontProxy, skipLookup bool) error {
	if apiService != "" {
		gv, err := schema.ParseGroupVersion(apiService)
		if err != nil || gv.Group == "" || gv.Version == "" || strings.Contains(gv.Version, "/") {
			return fmt.Errorf("--apiservice %q is not GROUP/VERSION (an APIService's group and version, e.g. dashboard.example.com/v1)", apiService)
		}
		c.apiService = gv
	}
	names := len(fp.AllowedNames) + len(fp.UsernameHeaders) + len(fp.UIDHeaders) + len(fp.GroupHeaders) + len(fp.ExtraHeaderPrefixes)
	switch {
	case fp.ClientCAFile == "" && names > 0:
		return errors.New("--requestheader-allowed-names and the --requestheader-*-headers flags go with --requestheader-client-ca-file: without it, the ConfigMap gives them")
	case c.apiService.Empty() && fp.ClientCAFile == "" && skipLookup:
		return errors.New("--authentication-skip-lookup goes with --apiservice: without a front proxy there is nothing to look up")
	case c.apiService.Empty() && fp.ClientCAFile == "":
		return nil // bearer callers only
	case fp.ClientCAFile == "" && skipLookup:
		return errors.New("--apiservice with --authentication-skip-lookup needs --requestheader-client-ca-file: the front proxy's CA must come from somewhere")
	case c.certFile == "":
		return errors.New("the front proxy (--apiservice, --requestheader-client-ca-file) needs --tls-cert-file and --tls-key-file: the API server sends its client certificate over TLS only")
	}
	c.auth.FrontProxy = &fp
	return nil
}

// origins is --trusted-origins: the defaults until it is given.
type origins struct {
	list *[]string
	set  bool
}

func (o *origins) String() string {
	if o.list == nil {
		return ""
	}
	return strings.Join(*o.list, ",")
}

func (o *origins) Set(s string) error {
	if !o.set {
		*o.list, o.set = nil, true
	}
	return (*list)(o.list).Set(s)
}

// minVersion reads --tls-min-version, as Kubernetes components spell it;
// nothing older than TLS 1.2 is served.
func minVersion(name string) (uint16, error) {
	v, err := cliflag.TLSVersion(name) // "" is VersionTLS12
	switch {
	case err != nil:
		return 0, fmt.Errorf("--tls-min-version %q is not VersionTLS12 or VersionTLS13", name)
	case v < tls.VersionTLS12:
		return 0, fmt.Errorf("--tls-min-version %s: nothing older than VersionTLS12 is served", name)
	}
	return v, nil
}

// parseResource reads --authorize-resource: namespace/resource[/subresource]
// (an empty namespace for cluster-scoped resources), or key=value pairs for
// all of a SubjectAccessReview's resource attributes.
func parseResource(s string) (*authzv1.ResourceAttributes, error) {
	attrs := &authzv1.ResourceAttributes{}
	if !strings.Contains(s, "=") {
		parts := strings.Split(s, "/")
		if len(parts) < 2 || len(parts) > 3 || parts[1] == "" {
			return nil, errors.New("not namespace/resource[/subresource], nor key=value pairs")
		}
		attrs.Namespace, attrs.Resource = parts[0], parts[1]
		if len(parts) == 3 {
			attrs.Subresource = parts[2]
		}
		return attrs, nil
	}
	fields := map[string]*string{
		"namespace": &attrs.Namespace, "group": &attrs.Group, "apigroup": &attrs.Group, "version": &attrs.Version,
		"apiversion": &attrs.Version, "resource": &attrs.Resource, "subresource": &attrs.Subresource, "name": &attrs.Name, "verb": &attrs.Verb,
	}
	seen := map[*string]bool{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		field := fields[strings.ToLower(k)]
		switch {
		case !ok || field == nil:
			return nil, fmt.Errorf("%q is not key=value with a key of namespace, group, version, resource, subresource, name, verb", kv)
		case seen[field]:
			return nil, fmt.Errorf("%s given twice", k)
		}
		*field, seen[field] = v, true
	}
	if attrs.Resource == "" {
		return nil, errors.New("resource= is required")
	}
	return attrs, nil
}

// list is a flag that may be repeated and holds comma-separated values,
// empty ones dropped.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }

func (l *list) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// tls12Only keeps the names of cipher suites that TLS 1.2 uses, as
// k8s.io's flag parser reads them (its older spellings of the ChaCha20
// suites too): crypto/tls picks TLS 1.3's by itself, whatever a config
// lists, and k8s.io's lists of names hold both.
func tls12Only(names []string) []string {
	var out []string
	for _, n := range names {
		ids, err := cliflag.TLSCipherSuites([]string{strings.TrimSpace(n)})
		if err != nil || len(ids) != 1 {
			continue
		}
		for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
			if cs.ID == ids[0] && slices.Contains(cs.SupportedVersions, tls.VersionTLS12) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}
