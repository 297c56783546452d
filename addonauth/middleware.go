package addonauth

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Middleware verifies the caller of each request and hands the request to
// next with the caller's identity: in the headers Options.Headers names
// (every incoming copy of those, and of the X-Remote-* family, removed
// first) and in the context (UserFrom). Authorization is removed. A request
// without a valid token is answered here and never reaches next; so is one
// for a path outside Options.AllowPaths (404). One for Options.IgnorePaths
// reaches next unverified, with no identity.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if len(a.opts.AllowPaths) > 0 && !pathPatterns(a.opts.AllowPaths).match(r.URL) {
			a.metrics.requests.WithLabelValues("not_found").Inc()
			closeUnread(w, r)
			http.NotFound(w, r)
			return
		}
		if pathPatterns(a.opts.IgnorePaths).match(r.URL) {
			a.serveIgnored(w, r, next)
			return
		}
		u, err := a.authenticateRequest(r)
		if err != nil {
			a.metrics.verifySeconds.Observe(time.Since(start).Seconds())
			a.refuse(w, r, err)
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
			a.refuse(w, r, err)
			return
		}
		ctx, w, stop := a.bound(r.Context(), r.Header.Get("Authorization"), u, w)
		defer stop()
		out := r.WithContext(withUser(ctx, u))
		out.Header = a.forwardHeaders(r.Header, u)
		a.stripTrailers(out)
		a.metrics.requests.WithLabelValues("forwarded").Inc()
		a.metrics.verifySeconds.Observe(time.Since(start).Seconds())
		next.ServeHTTP(w, out)
	})
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
// allowed the request, without reading its body.
func (a *Authenticator) refuse(w http.ResponseWriter, r *http.Request, err error) {
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
		a.opts.Logger.V(1).Info("caller not allowed", "reason", err.Error(), "path", r.URL.Path, "remote", r.RemoteAddr)
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	a.metrics.requests.WithLabelValues("unauthenticated").Inc()
	a.opts.Logger.V(1).Info("caller refused", "reason", err.Error(), "path", r.URL.Path, "remote", r.RemoteAddr)
	if errors.Is(err, errMissing) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+a.opts.Audience+`"`)
	} else {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q, error="invalid_token", error_description=%q`, a.opts.Audience, err.Error()))
	}
	http.Error(w, "unauthorized", http.StatusUnauthorized)
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
	return out
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
	return hasPrefixFold(name, "x-remote-") || hasPrefixFold(name, "x-authenticated-")
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
