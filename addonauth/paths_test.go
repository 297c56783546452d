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
		`/public/..%2Fadmin`, `/public/..%2fadmin`, `/public%2F..%2F..%2Fadmin`, `/public/a%2Fb`,
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
