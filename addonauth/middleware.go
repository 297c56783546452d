package addonauth

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/authvault/authvault/internal/methodoverride"
)

// Middleware verifies the caller of each request and hands the request to
// next with the caller's identity: in the headers Options.Headers names
// (every incoming copy of those, and of the X-Remote-* family, removed
// first) and in the context (UserFrom). Authorization is removed. A request
// without a valid token is answered here and never reaches next; so is one
// for a path outside Options.AllowPaths (404), and a browser's cross-origin
// request that could act or read as the person (403, see the package
// doc's Browsers). One for Options.IgnorePaths reaches next unverified,
// with no identity.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if len(a.opts.AllowPaths) > 0 && !pathPatterns(a.opts.AllowPaths).match(r.URL) {
			a.metrics.requests.WithLabelValues("not_found").Inc()
			closeUnread(w, r)
			http.NotFound(w, r)
			return
		}
		// Before anything costs a review: a browser sent it, with the
		// person's identity, for a page of another site.
		keep, err := a.origins.check(r)
		if err != nil {
			a.metrics.verifySeconds.Observe(time.Since(start).Seconds())
			a.refuseCrossOrigin(w, r)
			return
		}
		if keep {
			w = keptFromPage{w}
		}
		if pathPatterns(a.opts.IgnorePaths).match(r.URL) {
			a.serveIgnored(w, r, next)
			return
		}
		u, fromProxy, err := a.identify(r)
		switch {
		case err != nil:
		case !forwardable(u):
			// A transport trims a value's blanks and refuses CR, LF and
			// NUL, and any hop may join a header's values with commas:
			// forwarded, " system:masters", or "viewers,system:masters",
			// could reach a reader as a group the API server never gave.
			err = fmt.Errorf("%w: %w", errForbidden, errUnforwardable)
		case fromProxy && methodoverride.In(r):
			// The API server authorized the request's method: the
			// upstream must not take it as another.
			err = fmt.Errorf("%w: %w (the API server authorized the request's own method)", errForbidden, errMethodOverride)
		}
		if err != nil {
			a.metrics.verifySeconds.Observe(time.Since(start).Seconds())
			a.refuse(w, r, u, err)
			return
		}
		// The limit before the review: a caller over its rate must not
		// cost the API server a SubjectAccessReview per request.
		if ok, wait := a.limits.allow(u.Name, a.opts.now()); !ok {
			a.metrics.verifySeconds.Observe(time.Since(start).Seconds())
			a.metrics.requests.WithLabelValues("rate_limited").Inc()
			closeUnread(w, r)
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		if err := a.authz.authorize(r.Context(), u, r); err != nil {
			a.metrics.verifySeconds.Observe(time.Since(start).Seconds())
			a.refuse(w, r, u, err)
			return
		}
		authorization := r.Header.Get("Authorization")
		if fromProxy {
			authorization = "" // no token to review again: the API server vouched for the request alone
		}
		ctx, w, stop := a.bound(r.Context(), authorization, u, w)
		defer stop()
		out := r.WithContext(withUser(ctx, u))
		out.Header = a.forwardHeaders(r.Header, u)
		a.stripTrailers(out)
		a.metrics.requests.WithLabelValues("forwarded").Inc()
		a.metrics.verifySeconds.Observe(time.Since(start).Seconds())
		next.ServeHTTP(w, out)
	})
}

// identify finds the request's caller: the one a front proxy vouches for
// (fromProxy), else the bearer token's. A request with a client
// certificate that is not a front proxy's is a bearer caller; so is one
// with a token while the front proxy's configuration is not loaded.
func (a *Authenticator) identify(r *http.Request) (u User, fromProxy bool, err error) {
	if a.front != nil {
		u, ok, err := a.front.authenticate(r)
		switch {
		case ok:
			return u, true, nil
		case errors.Is(err, errFrontProxyUnavailable) && r.Header.Get("Authorization") == "":
			return User{}, false, fmt.Errorf("%w: %w", errUnavailable, err)
		case err != nil:
			// Trusted for nothing: its identity headers are dropped with
			// every other caller's.
			a.opts.Logger.V(1).Info("client certificate is not a front proxy's", "reason", err.Error(), "remote", r.RemoteAddr)
		}
	}
	u, err = a.authenticateRequest(r)
	return u, false, err
}

// authenticateRequest finds the request's bearer token and verifies it.
func (a *Authenticator) authenticateRequest(r *http.Request) (User, error) {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return User{}, errMissing // none, or several: which one would the caller mean?
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return User{}, errMissing
	}
	return a.Authenticate(r.Context(), strings.TrimSpace(token))
}

// refuse answers a request whose caller could not be verified, or is not
// allowed the request, without reading its body. u is the caller when it
// was verified (a refusal of what it asked), else the zero User.
func (a *Authenticator) refuse(w http.ResponseWriter, r *http.Request, u User, err error) {
	closeUnread(w, r)
	if errors.Is(err, errUnavailable) {
		a.metrics.requests.WithLabelValues("unavailable").Inc()
		// Per request at V(1): the outage itself is logged once, when it
		// starts and when it ends (see circuit, keySet).
		a.opts.Logger.V(1).Info("caller cannot be verified now", "reason", err.Error(), "path", r.URL.Path, "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the caller cannot be verified now", http.StatusServiceUnavailable)
		return
	}
	if errors.Is(err, errForbidden) {
		a.metrics.requests.WithLabelValues("forbidden").Inc()
		a.opts.Logger.V(1).Info("caller not allowed", "user", u.Name, "reason", err.Error(), "path", r.URL.Path, "remote", r.RemoteAddr)
		a.refusals.note(a.opts.Logger, a.opts.now(), "forbidden", err.Error())
		http.Error(w, forbiddenText(err), http.StatusForbidden)
		return
	}
	a.metrics.requests.WithLabelValues("unauthenticated").Inc()
	a.opts.Logger.V(1).Info("caller refused", "reason", err.Error(), "path", r.URL.Path, "remote", r.RemoteAddr)
	a.refusals.note(a.opts.Logger, a.opts.now(), "unauthenticated", err.Error())
	if errors.Is(err, errMissing) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+a.opts.Audience+`"`)
	} else {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q, error="invalid_token", error_description=%q`, a.opts.Audience, err.Error()))
	}
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// errUnforwardable: the caller's identity holds a value that no header
// carries as it is.
var errUnforwardable = errors.New("addonauth: the caller's identity holds a value no header carries as it is (a comma, CR, LF, NUL, or blanks at its ends)")

// forbiddenText is what a caller refused with 403 reads: why, where the
// reason is the request's or the identity's, not the API server's.
func forbiddenText(err error) string {
	switch {
	case errors.Is(err, errMethodOverride):
		return "forbidden: the request carries a method override (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override or a _method parameter): " +
			"it was authorized for its own method, and the service must not take it as another"
	case errors.Is(err, errUnforwardable):
		return "forbidden: your identity holds a value (a user name, group or extra value with a comma, CR, LF, NUL, or blanks at its ends) " +
			"that cannot reach the service as it is: a reader could split or trim it into another"
	}
	return "forbidden"
}

// forwardHeaders are h without the caller's credentials and claimed
// identity, with u's identity.
func (a *Authenticator) forwardHeaders(h http.Header, u User) http.Header {
	out := a.withoutIdentity(h)
	hd := a.opts.Headers
	out.Set(hd.User, u.Name)
	if u.UID != "" {
		out.Set(hd.UID, u.UID)
	}
	for _, g := range u.Groups {
		out.Add(hd.Groups, g)
	}
	if hd.Extra != "" {
		for k, values := range u.Extra {
			name := hd.Extra + escapeExtraKey(k)
			for _, v := range values {
				out.Add(name, v)
			}
		}
	}
	return out
}

// forwardable tells whether every value of u reaches the upstream as it
// is: a header value (no CR, LF, NUL) without the blanks a sender or a
// reader trims, and without a comma, at which a reader splits a list that
// a hop joined (RFC 9110 section 5.3). The middleware refuses a caller
// whose identity is not.
func forwardable(u User) bool {
	ok := func(v string) bool {
		return httpguts.ValidHeaderFieldValue(v) && textproto.TrimString(v) == v && !strings.Contains(v, ",")
	}
	if !ok(u.Name) || !ok(u.UID) {
		return false
	}
	for _, g := range u.Groups {
		if !ok(g) {
			return false
		}
	}
	for _, values := range u.Extra {
		for _, v := range values {
			if !ok(v) {
				return false
			}
		}
	}
	return true
}

// escapeExtraKey percent-escapes what may not stand in a header name, and
// "%" itself, as the API server's aggregation layer escapes an extra
// attribute's key; the requestheader authenticator unescapes it.
func escapeExtraKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c != '%' && isTokenByte(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// isTokenByte tells whether c may stand in a header name (RFC 9110's
// tchar).
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// withoutIdentity is a copy of h without the caller's credentials and
// claimed identity, with room for the identity headers.
func (a *Authenticator) withoutIdentity(h http.Header) http.Header {
	out := make(http.Header, len(h)+3)
	for name, values := range h {
		if a.isIdentityHeader(name) {
			continue
		}
		out[name] = values
	}
	// A proxy behind the middleware drops the headers Connection names:
	// a caller must not make it drop the identity set here. Nor may
	// Trailer (a header when the body is not chunked) announce identity
	// headers to come after the body.
	for _, list := range []string{"Connection", "Trailer"} {
		a.dropIdentityNames(out, list)
	}
	return out
}

// dropIdentityNames removes the identity header names from the header
// list, a comma-separated list of header names.
func (a *Authenticator) dropIdentityNames(h http.Header, list string) {
	values, ok := h[list]
	if !ok {
		return
	}
	var keep []string
	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" && !a.isIdentityHeader(name) {
				keep = append(keep, name)
			}
		}
	}
	delete(h, list)
	if len(keep) > 0 {
		h[list] = []string{strings.Join(keep, ", ")}
	}
}

// isIdentityHeader tells whether a header named name must not reach the
// upstream from the caller, whatever its spelling: Authorization, the
// configured identity headers, and the X-Remote-* and X-Authenticated-*
// families an upstream may trust. An underscore counts as a hyphen, as
// servers that map headers to variables (CGI, WSGI, Rack) read it.
func (a *Authenticator) isIdentityHeader(name string) bool {
	if strings.Contains(name, "_") {
		name = strings.ReplaceAll(name, "_", "-")
	}
	for _, n := range a.identityNames {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	if hasPrefixFold(name, "x-remote-") || hasPrefixFold(name, "x-authenticated-") {
		return true
	}
	if extra := a.opts.Headers.Extra; extra != "" && hasPrefixFold(name, strings.ReplaceAll(extra, "_", "-")) {
		return true
	}
	return a.front != nil && a.front.isHeader(name)
}

// identityNames are the header names isIdentityHeader refuses outright,
// underscores as hyphens; made once, since every header of every request
// is checked against them.
func identityNames(hd Headers) []string {
	names := []string{"Authorization"}
	for _, n := range []string{hd.User, hd.Groups, hd.UID} {
		names = append(names, strings.ReplaceAll(n, "_", "-"))
	}
	return names
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
