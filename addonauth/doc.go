// Package addonauth tells an in-cluster service who is calling it, without
// the service handling credentials: the Kubernetes "addon authentication"
// pattern. [Authenticator.Middleware] checks the caller's bearer token,
// removes it, and hands the request on with the caller's identity in
// headers (and in the context, [UserFrom]); cmd/addon-proxy is the same as a
// sidecar in front of a service listening on localhost.
//
//	a, err := addonauth.New(addonauth.Options{Audience: "dashboard.kube-system.svc", Config: cfg})
//	http.Handle("/", a.Middleware(upstream))
//
// Config reaches the API server; from a vault, the proxy's own credentials
// rotate like any operator's. The guide docs/addonauth.md in the
// repository deploys the sidecar and compares it with kube-rbac-proxy.
//
// # Verification
//
// Two checks, both on by default. The local one verifies a token that is a
// JWT of the API server's service-account issuer: its signature against the
// issuer's keys (discovery and JWKS fetched through Config from the API
// server itself, since the advertised jwks_uri is often unreachable from a
// pod), its issuer, an audience that is one of the service's
// (Options.Audience and Options.Audiences, so a token meant for one service
// cannot be replayed to another), and its expiry and
// not-before with a small leeway. Anything else (garbage, another issuer,
// a key the cluster does not have, another audience, an expired token) is
// refused there and never costs an API call. An unknown key id refetches
// the key set, at most once per Options.KeyRefetchInterval; keys survive
// an API outage.
//
// A changed issuer needs no restart. The API server restarted with
// --service-account-issuer=new --service-account-issuer=old signs with the
// new one and accepts both, but its discovery names only the first. Every
// issuer discovery has named since the start is remembered; a token signed
// with the cluster's key that names another refetches discovery (at most
// once per KeyRefetchInterval), and when discovery still does not name it
// (the old issuer, for an Authenticator started after the change), the
// TokenReview decides. With Options.NoReview nothing else can vouch for
// such an issuer, so discovery is fetched again at once (at most once a
// second), not after the interval: a new issuer's tokens are served from
// the first. A token whose issuer discovery still does not name is refused
// once a fetch that surely began after the token was issued (its iat, plus
// Leeway for the clocks) says so; until then, and while discovery cannot
// be fetched, it gets 503 with Retry-After rather than 401.
//
// The second is a TokenReview with the audiences, which sees what no
// signature shows: a token whose Pod or ServiceAccount was deleted. Its
// answers are cached by a keyed hash of the token (never the token),
// separately for success and failure, errors never; one review is in
// flight per token however many requests carry it, and a request whose
// caller goes away stops waiting for it at once while it goes on for the
// others (as the key fetch and the SubjectAccessReviews do, each bounded
// by its own timeout). While the API server cannot be reached, a token
// whose last successful review is younger than Options.StaleIfError is
// still accepted; others get 503. Such a token's request waits for its
// review only Options.StaleWait (300 ms), then is served from that
// review while the new one goes on in the background: a healthy API server
// answers within it, so a revocation is still seen at once, and one
// answered later is kept for the next requests. Once a caller has stopped
// waiting, the others with such a token are served at once until a review
// answers (a ReviewTimeout at most). A failed or
// timed-out review of a token the local check vouched for is remembered
// (a foreign token's may fail for its own sake, a webhook's behind the
// API server): for a second after it, no review is sent, so a hung API
// server costs a token without a verdict one ReviewTimeout at its onset
// and 503 after, and a token with one StaleWait at most; then one review
// at a time finds out whether it is back.
// An outage is logged once when it begins and once when it ends; each
// refused request at V(1).
//
// With Options.ReviewForeign, a token that is not the cluster's goes to
// TokenReview. If it is a JWT, its exp claim (unverified: it can only
// shorten access) bounds it as a service-account token's does: never
// served past it, from the cache or stale, and refused unreviewed after.
//
// A token with whitespace in it (once the whitespace around it is
// trimmed) is refused with 401, never reviewed: the API server would
// review only what comes before the first space, a token that skipped the
// local check. No service-account token has whitespace; an opaque token
// that does is refused, under ReviewForeign too. A 400
// to a review is an answer about its token, a refusal, not a failure of
// the API server's.
//
// # Forwarding
//
// Authorization is removed, and so is every incoming copy of the identity
// headers (any spelling, and the X-Remote-* and X-Authenticated-* families),
// in trailers too, and from the names Connection and Trailer list, so a
// caller cannot claim an identity; then the caller's user name, UID and
// groups are set. A missing, bad or wrong-audience token gets 401 with
// WWW-Authenticate, a caller over its rate 429 with Retry-After, a token
// that cannot be verified now 503; none is forwarded. A refusal is written
// at once, without waiting for the request's body: over HTTP/1, a request
// with a body gets "Connection: close", and what the caller sends in the
// second after it (at most 256 KiB) is read and dropped before the
// connection closes, so a body trickled a byte at a time holds nothing and
// one already on its way does not turn the refusal into a reset.
//
// # Front proxy
//
// A person behind kubectl proxy brings no token: the API server deletes
// Authorization once it has authenticated them. For a service registered
// as an APIService, its aggregation layer forwards them instead, in
// X-Remote-User, X-Remote-Uid, X-Remote-Group and X-Remote-Extra-*, over
// TLS with its front-proxy client certificate. With Options.FrontProxy, a
// request is taken as the API server's word only when its client
// certificate verifies against the requestheader client CA, for client
// authentication, and its common name is among the allowed names (any,
// when they are empty): k8s.io/apiserver's x509 verifier and requestheader
// authenticator decide, as in every aggregated API server. The CA, the
// names and the header names come from ConfigMap
// kube-system/extension-apiserver-authentication, watched while Start
// runs (a CA added is trusted and one removed refused at once), or from
// FrontProxy's file and fields. Such a caller reaches the upstream as a
// bearer caller does (the headers, UserFrom, the rate limit and
// Authorization), costs no TokenReview (with Options.Authorization, a
// SubjectAccessReview still, with its extras), and is not reviewed again
// while its request lasts: the API server vouched for that request alone, and
// MaxRequestDuration still bounds it. The API server authorized its
// method, so it is refused with 403 when it carries a method override
// (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override, in headers or
// announced trailers, or a _method query parameter). Its certificate's
// chain is checked once per connection (the aggregator keeps its
// connections alive) and again whenever the CA or names in force change,
// or the chain's earliest expiry passes. Every other request, a client
// certificate of another CA or name among them, has those headers removed
// (and every header name a configuration read since New named, even once
// it is gone) and is a bearer caller,
// on the same listener; the server must ask for client certificates
// (tls.RequestClientCert) without verifying them. While the configuration
// is not loaded (before Start has read it; while the ConfigMap is missing
// or a version of it malformed; or while it cannot be read before any
// version has been: later, the last version read stays in force through
// an outage), a request with a client certificate and no token gets 503,
// and the reason is logged when it changes. Unlike k8s.io/apiserver, a
// deleted or malformed ConfigMap is not covered by the last good version:
// the API server writes a deleted one back at once, and a version someone
// garbled is not the cluster's word. A caller whose identity holds a value
// that no header carries as it is (CR, LF, NUL, blanks a transport trims,
// or a comma, at which a hop may have joined a list: a group
// " system:masters" or "viewers,system:masters") is refused with 403,
// whoever vouched for it.
//
// # Browsers
//
// A browser sends a request with whatever identity it holds for the
// address, whichever page asked: kubectl proxy adds the person's
// credential on the way. Before a caller is verified, a browser's request
// from another origin (Sec-Fetch-Site cross-site or same-site, or, from a
// browser that sends none, an Origin that is not the Host's), unless its
// Origin is one of Options.TrustedOrigins, gets 403 when it is unsafe (any
// method but GET, HEAD and OPTIONS), when it asks to switch protocols (a
// WebSocket's handshake: no same-origin policy keeps its messages from the
// page), or when its answer would become part of the page (Sec-Fetch-Dest:
// a frame the page may draw over, a script or style it runs). Any other
// safe request from another site (a link followed, a fetch, an image) is
// served, with the upstream's CORS headers removed from its answer, so
// that the browser keeps the answer from the page whatever the upstream
// allows. Programs send none of these headers and pass; a browser app of
// another origin with a bearer token of its own is refused until its
// origin is listed, and IgnorePaths are checked too. The refusal is a
// plain-text page that says what happened and where the origin may be
// trusted (Options.TrustedOriginsSetting).
//
// # Acting as the caller
//
// ActAsCaller makes, from the service's own config, one whose every
// request carries the caller the middleware verified for the request being
// served (Impersonate-User, -Uid, -Group, -Extra-*), taken from the
// context the request is made with, never from a header: the API server's
// RBAC then decides what each person sees, and its audit log names both.
// A request with no verified caller in its context fails with ErrNoCaller
// before it is sent. The RBAC it needs, constrained impersonation
// (KEP-5284) or classic, is in deploy/dashboard and docs/addonauth.md.
//
// # Paths
//
// Options.AllowPaths, when set, are the only paths served (404 for others,
// before any verification); Options.IgnorePaths are served unverified,
// with no identity set and none claimable. With both set, an ignored path
// must be allowed too. Both are path.Match patterns ("*" does not cross a
// "/"), matched only against a path every upstream reads the same way (see
// Authorization): no pattern can be climbed out of, and such a path
// matches none, so it is verified, and with AllowPaths it gets 404.
//
// # Bounds
//
// A per-user token bucket (Options.RatePerUser) limits each caller, before
// any SubjectAccessReview: a caller over its rate costs no API call. Every
// request ends by Options.MaxRequestDuration and by its token's expiry, and
// one that lasts (a watch, a WebSocket) is reviewed again every
// Options.SuccessTTL (first when the cached verdict it was let in on
// lapses) and ended when its token is revoked: access stops when the
// credential does, a SuccessTTL after at most. Requests that hold one
// token share its reviews: a verdict asked after a request's last check
// serves it, whoever asked, so a token costs one review a SuccessTTL
// however many streams hold it; one asked before never does. Ending a
// request ends its context and makes its connection's reads and writes
// fail, so a handler blocked writing to a caller that stopped reading (a
// proxy copying a watch) returns too; on an ignored path
// (Options.IgnorePaths) MaxRequestDuration does the same.
//
// A connection the upstream hijacks (http.Hijacker, as a WebSocket server
// does, or a ReverseProxy switching protocols) is closed at the same
// moments, even after its handler has returned; the bound lasts until the
// connection is closed, by its Close or by the middleware. The writer the
// upstream gets offers Flush and Hijack where the server's does, the rest
// of http.ResponseController through Unwrap, and the deprecated
// CloseNotify (which some frameworks still assert); over HTTP/2 there is
// nothing to hijack, and a stream ends with its context.
//
// # Authorization
//
// Off by default: the pattern keeps authentication and authorization
// apart, and the upstream sees the caller's groups. Options.Authorization
// adds a SubjectAccessReview for each caller and request (the request's
// path and verb, or resource attributes as kube-rbac-proxy's), cached for
// allow and deny separately; a caller that is not allowed gets 403.
//
// When the review names the request's path (Authorization.Resource nil),
// it names the path the middleware sees, while the upstream receives the
// raw one. Where they could differ, the request gets 403 without a review:
// a backslash (a slash to some servers), ";" (path parameters Tomcat and
// Jetty strip: /public/..;/admin), an encoded slash, "%" left after
// decoding (double encoding), empty, "." or ".." segments or segments of
// dots only, "#" or "?" decoded from the path, control bytes, spaces and
// bytes outside ASCII, a path over 4 KiB. A client that joins URLs into
// "//" gets 403 there.
//
// Whenever the verb comes from the request (no Resource.Verb), a request
// that asks the upstream to take it as another method than the one
// reviewed gets 403 without a review too: X-HTTP-Method-Override,
// X-HTTP-Method, X-Method-Override, or a _method query parameter, in any
// spelling PHP reads as one (.method, _method[]). An override in a form
// body cannot be seen without reading the body: an upstream behind
// authorization must not honour it. Before these checks, such paths and
// overrides were reviewed and forwarded.
//
// # Secrets
//
// A token never appears in a log line, an error, a metric label or a
// response; the cache holds an HMAC of it with a key made per process.
package addonauth
