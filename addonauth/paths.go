package addonauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
)

// maxPathBytes bounds a path the middleware matches against patterns or
// names in a SubjectAccessReview: far above what a service's routes need,
// and a bound on what a caller can make the API server read.
const maxPathBytes = 4096

// errPath: a request's path is not one every upstream reads as the same
// path; the text says why (in the log, never in the response).
var errPath = errors.New("addonauth: a path upstreams may read differently")

// canonicalPath returns u's decoded path when every upstream serves it as
// that same path, and an error wrapping errPath when one may not. The
// middleware decides on this path (authorization, AllowPaths, IgnorePaths)
// while the upstream receives the raw one, so the two must not diverge:
//
//   - a backslash is a slash to some servers (IIS, some Java and Node
//     routers), so /public/..\admin is /admin there;
//   - ";" starts path parameters that Tomcat and Jetty strip:
//     /public/..;/admin is /admin there;
//   - an encoded slash (%2F) is a separator to upstreams that decode before
//     routing and part of a name to others; "%" left after decoding is
//     double encoding, for upstreams that decode twice;
//   - empty, "." and ".." segments (and segments of dots only, which some
//     systems trim to ".") are collapsed differently, or not at all;
//   - "#" and "?" (decoded from %23, %3F) end a path early for some;
//   - control bytes, spaces and bytes outside ASCII (overlong UTF-8 dots,
//     full-width dots and solidus that some upstreams fold to "./") are
//     read in as many ways as there are decoders.
//
// Refusing these costs little: none belongs in a service's own routes.
func canonicalPath(u *url.URL) (string, error) {
	p, raw := u.Path, u.EscapedPath()
	switch {
	case len(raw) > maxPathBytes:
		return "", fmt.Errorf("%w: longer than %d bytes", errPath, maxPathBytes)
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: not absolute", errPath)
	case hasEncodedSlash(raw), hasEncodedSlash(u.RawPath):
		// RawPath too: EscapedPath re-encodes the decoded path when the
		// raw one holds a byte it would escape ("/a%2Fb{"), while an
		// upstream in the same process may route on RawPath.
		return "", fmt.Errorf("%w: an encoded slash", errPath)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`\;%#?`, c) >= 0 {
			return "", fmt.Errorf("%w: the byte %q", errPath, c)
		}
	}
	segments := strings.Split(p[1:], "/")
	for i, s := range segments {
		switch {
		case s == "" && i < len(segments)-1: // a trailing slash is fine
			return "", fmt.Errorf("%w: an empty segment", errPath)
		case s != "" && strings.Trim(s, ".") == "":
			return "", fmt.Errorf("%w: a dot segment", errPath)
		}
	}
	return p, nil
}

func hasEncodedSlash(p string) bool {
	return strings.Contains(p, "%2F") || strings.Contains(p, "%2f")
}

// pathPatterns are path.Match patterns ("/metrics", "/api/*"), matched
// against a request's canonical path only: a path upstreams may read
// differently matches none.
type pathPatterns []string

// checkPathPatterns checks each pattern's syntax, so a bad one is an
// error when the Authenticator is made, not a 500 on every request.
func checkPathPatterns(field string, patterns []string) error {
	for _, p := range patterns {
		if _, err := path.Match(p, "/"); err != nil || !strings.HasPrefix(p, "/") {
			return fmt.Errorf("addonauth: Options.%s: %q is not an absolute path pattern (path.Match)", field, p)
		}
	}
	return nil
}

// match tells whether u's path is canonical and matches one of the
// patterns.
func (pp pathPatterns) match(u *url.URL) bool {
	if len(pp) == 0 {
		return false
	}
	p, err := canonicalPath(u)
	if err != nil {
		return false
	}
	for _, pattern := range pp {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
	}
	return false
}

// serveIgnored forwards a request for one of IgnorePaths without
// verifying its caller: no identity is set, and none may be claimed
// (every identity header and trailer, and the token, are removed as on
// any request). Its length is still bounded by MaxRequestDuration.
func (a *Authenticator) serveIgnored(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx := r.Context()
	if d := a.opts.MaxRequestDuration; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
		// As bound.cut: a caller that stops reading must not hold the
		// handler past MaxRequestDuration, here least of all, where
		// anyone may call.
		var mu sync.Mutex // guards served
		served := false
		context.AfterFunc(ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			if !served && r.Context().Err() == nil {
				cutConn(w)
			}
		})
		defer func() { mu.Lock(); served = true; mu.Unlock() }()
	}
	out := r.WithContext(ctx)
	out.Header = a.withoutIdentity(r.Header)
	a.stripTrailers(out)
	a.metrics.requests.WithLabelValues("ignored").Inc()
	next.ServeHTTP(w, out)
}
