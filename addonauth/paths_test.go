package addonauth

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawGet sends target exactly as given, which http.Client would escape or
// refuse, and returns the status code.
func rawGet(t *testing.T, addr, target string, header http.Header) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: upstream\r\nConnection: close\r\n", target)
	for name, values := range header {
		for _, v := range values {
			fmt.Fprintf(&b, "%s: %s\r\n", name, v)
		}
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %q: %v", target, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Paths that some upstream serves as another path than the one the
// SubjectAccessReview names (a backslash read as a slash, ";" parameters
// stripped, encoded dots or slashes decoded, empty segments collapsed,
// bytes that end a path early) are refused when authorization checks
// the path: a caller allowed /public/* must not reach /admin through
// them.
func TestAuthorizationRefusesPathsUpstreamsReadDifferently(t *testing.T) {
	s := newSetup(t, Options{Authorization: &Authorization{}})
	tok := s.api.token(t, "team-a", "reader", audience, time.Hour)
	s.api.allowed["system:serviceaccount:team-a:reader get /public/*"] = true
	auth := http.Header{"Authorization": {"Bearer " + tok}}
	addr := s.srv.Listener.Addr().String()

	refused := []string{
		// backslashes, raw and encoded
		`/public/..\admin`, `/public\..\admin`, `/public/..%5Cadmin`, `/public/..%5cadmin`, `/public/%5C..%5Cadmin`,
		// ";" path parameters, in any segment, raw and encoded
		`/public/..;/admin`, `/public/..;x=1/admin`, `/public;/../admin`, `/public/a;jsessionid=1`, `/public/..%3B/admin`, `/public/..%3b/admin`,
		// encoded dots
		`/public/%2e%2e/admin`, `/public/%2E%2E/admin`, `/public/.%2e/admin`, `/public/%2e./admin`, `/public/%2e/admin`,
		// encoded slashes: the SubjectAccessReview would see one more segment than some upstreams
		`/public/..%2Fadmin`, `/public/..%2fadmin`, `/public%2F..%2F..%2Fadmin`, `/public/a%2Fb`, `/public/a%2Fb{`,
		// double encoding, for upstreams that decode twice
		`/public/%252e%252e/admin`, `/public/..%255Cadmin`,
		// empty segments
		`/public//admin`, `//public/a`, `/public//../admin`, `/public/a//`,
		// dot segments, at the end too, and runs of dots some systems trim
		`/public/..`, `/public/a/..`, `/public/../`, `/public/.`, `/public/./a`, `/public/...`, `/public/.../admin`, `/public/..%20/admin`,
		// NUL, control bytes, space, DEL, bytes that end a path early
		`/public/%00/admin`, `/public/a%00`, `/public/%0d%0aX-Injected:%201`, `/public/%09`, `/public/%7f`, `/public/a%20`,
		`/public/a#/../../admin`, `/public/a%23/../../admin`, `/public/a%3F/../../admin`,
		// not ASCII: overlong UTF-8 dots, full-width dots and solidus some upstreams fold
		`/public/%C0%AE%C0%AE/admin`, `/public/%EF%BC%8E%EF%BC%8E%EF%BC%8Fadmin`, "/public/\xff",
		// overlong
		"/public/" + strings.Repeat("a", maxPathBytes),
		// not a path
		`*`,
	}
	for _, p := range refused {
		if got := rawGet(t, addr, p, auth); got != http.StatusForbidden {
			t.Errorf("GET %s = %d, want 403", shortQ(p), got)
		}
	}
	if n := s.up.count(); n != 0 {
		t.Errorf("%d requests with paths upstreams read differently reached the upstream", n)
	}

	allowed := []string{
		"/public/a", "/public/a/", "/public/", "/public/a.b", "/public/a..b", "/public/.well-known", "/public/~user/x-y_z",
		"/public/%61", // an encoded letter decodes to the same path everywhere
		"/public/a?x=/../../admin", "/public/a?x=%5C..%2F..%2Fadmin;y", "/public/a?", "http://elsewhere/public/a",
		"/public/" + strings.Repeat("a", maxPathBytes-len("/public/")),
	}
	for _, p := range allowed {
		if got := rawGet(t, addr, p, auth); got != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", shortQ(p), got)
		}
	}
	if got, want := s.up.count(), len(allowed); got != want {
		t.Errorf("%d requests reached the upstream, want the %d allowed", got, want)
	}
}

// shortQ quotes p, cut to a length a failure message can show.
func shortQ(p string) string {
	if len(p) > 60 {
		return fmt.Sprintf("%q… (%d bytes)", p[:60], len(p))
	}
	return fmt.Sprintf("%q", p)
}

// AllowPaths: only requests for these paths are handled, others get 404
// before any verification (no review for a path the service does not
// offer); a path upstreams may read differently matches no pattern.
func TestAllowPaths(t *testing.T) {
	s := newSetup(t, Options{AllowPaths: []string{"/hello", "/api/*"}})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	auth := http.Header{"Authorization": {"Bearer " + tok}}
	addr := s.srv.Listener.Addr().String()
	for target, want := range map[string]int{
		"/hello": 200, "/hello?x=1": 200, "/api/x": 200, "/api/x?y=/../../admin": 200,
		"/other": 404, "/hello/": 404, "/api/x/y": 404, "/api": 404, "/HELLO": 404,
		`/api/..%5Cadmin`: 404, `/api/..\admin`: 404, `/api/..;/admin`: 404, "/api/..": 404, "/api/%2e%2e": 404,
		"/api/.": 404, "/api/...": 404, "/api/a%2Fb": 404, "/api/a%00": 404, "//hello": 404, "*": 404,
	} {
		if got := rawGet(t, addr, target, auth); got != want {
			t.Errorf("GET %s = %d, want %d", shortQ(target), got, want)
		}
	}
	reviews := s.api.reviews.Load()
	if got := rawGet(t, addr, "/other", http.Header{"Authorization": {"Bearer " + s.api.token(t, "team-a", "new", audience, time.Hour)}}); got != 404 {
		t.Errorf("GET /other with a new token = %d, want 404", got)
	}
	if got := rawGet(t, addr, "/other", nil); got != 404 {
		t.Errorf("GET /other without a token = %d, want 404", got)
	}
	if s.api.reviews.Load() != reviews {
		t.Error("a path not allowed cost a TokenReview")
	}
	if got := rawGet(t, addr, "/hello", nil); got != 401 {
		t.Errorf("GET /hello without a token = %d, want 401", got)
	}
	conn := sendOther(t, addr)
	_ = conn.SetReadDeadline(time.Now().Add(slowBodyWait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 404 || !resp.Close {
		t.Errorf("POST /other with a trickling body = %v, %v; want 404 at once, closing", resp, err)
	}
}

// sendOther sends the head of a POST to /other whose body never comes.
func sendOther(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte("POST /other HTTP/1.1\r\nHost: upstream\r\nContent-Length: 100000\r\n\r\nx")); err != nil {
		t.Fatal(err)
	}
	return conn
}

// IgnorePaths skip verification (health checks, public assets), and they
// are still no way to claim an identity: every identity header and the
// token are removed as on any request, and none is set. A path upstreams
// may read differently is not ignored, so /public/..;/admin cannot climb
// out of an ignored prefix into a verified one.
func TestIgnorePaths(t *testing.T) {
	s := newSetup(t, Options{IgnorePaths: []string{"/healthz", "/public/*"}, Authorization: &Authorization{}})
	addr := s.srv.Listener.Addr().String()
	spoof := http.Header{
		"Authorization":          {"Bearer garbage"},
		"X-Authenticated-User":   {"admin"},
		"X_Authenticated_Groups": {"system:masters"},
		"X-Remote-User":          {"admin"},
		"Connection":             {"X-Authenticated-User"},
	}
	for _, target := range []string{"/healthz", "/healthz?verbose", "/public/x", "/public/a.b"} {
		if got := rawGet(t, addr, target, spoof); got != 200 {
			t.Errorf("GET %s = %d, want 200 without verification", target, got)
		}
	}
	if s.api.reviews.Load() != 0 || s.api.accessReviews.Load() != 0 || s.api.keyFetches.Load() != 0 {
		t.Errorf("ignored paths cost %d TokenReviews, %d SubjectAccessReviews, %d key fetches; want none",
			s.api.reviews.Load(), s.api.accessReviews.Load(), s.api.keyFetches.Load())
	}
	s.up.mu.Lock()
	for i, h := range s.up.seen {
		for name, values := range h {
			for _, v := range values {
				if name == "Authorization" || v == "admin" || v == "system:masters" || v == "garbage" {
					t.Errorf("request %d: %s: %s reached the upstream of an ignored path", i, name, v)
				}
			}
		}
		if u := s.up.user[i]; u.Name != "" {
			t.Errorf("request %d: UserFrom = %+v on an ignored path, want none", i, u)
		}
	}
	s.up.mu.Unlock()

	for _, target := range []string{
		`/public/..%5Cadmin`, `/public/..\admin`, `/public/..;/admin`, "/public/..", "/public/%2e%2e", "/public/%2E.",
		"/public/...", "/public/a%2F..%2F..%2Fadmin", "/public/a%00", "//healthz", "/healthz/", "/healthz/..", "/HEALTHZ", "/public/x/y",
	} {
		if got := rawGet(t, addr, target, nil); got != 401 {
			t.Errorf("GET %s without a token = %d, want 401: not an ignored path", shortQ(target), got)
		}
	}
}

func TestBadPathPatterns(t *testing.T) {
	for _, opts := range []Options{
		{AllowPaths: []string{"/a/["}},
		{IgnorePaths: []string{"healthz"}},
		{IgnorePaths: []string{""}},
	} {
		opts.Audience, opts.Config = audience, newFakeAPI(t).config()
		if _, err := New(opts); err == nil {
			t.Errorf("New(AllowPaths %q, IgnorePaths %q) accepted them", opts.AllowPaths, opts.IgnorePaths)
		}
	}
}

// With both lists, a path must be allowed before it can be ignored.
func TestAllowAndIgnorePaths(t *testing.T) {
	s := newSetup(t, Options{AllowPaths: []string{"/hello", "/metrics"}, IgnorePaths: []string{"/healthz", "/metrics"}})
	addr := s.srv.Listener.Addr().String()
	for target, want := range map[string]int{"/healthz": 404, "/metrics": 200, "/hello": 401} {
		if got := rawGet(t, addr, target, nil); got != want {
			t.Errorf("GET %s without a token = %d, want %d", target, got, want)
		}
	}
}
