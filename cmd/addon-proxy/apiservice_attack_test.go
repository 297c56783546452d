package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// rawRequest sends method and target as they are (no client cleans or
// escapes them) to srv, and reads the answer.
func rawRequest(t *testing.T, srv *httptest.Server, method, target string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: addon\r\nConnection: close\r\n\r\n", method, target)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// pathUpstream records the paths it is asked for.
type pathUpstream struct {
	paths chan string
	url   *url.URL
}

func newPathUpstream(t *testing.T) *pathUpstream {
	p := &pathUpstream{paths: make(chan string, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.paths <- r.URL.EscapedPath()
		_, _ = io.WriteString(w, "upstream")
	}))
	t.Cleanup(srv.Close)
	p.url, _ = url.Parse(srv.URL)
	return p
}

func (p *pathUpstream) reached() []string {
	var out []string
	for {
		select {
		case s := <-p.paths:
			out = append(out, s)
		default:
			return out
		}
	}
}

// The discovery document is the group-version's alone: HEAD is a GET
// without the body, and other methods, a query, a doubled slash or an
// encoded one are not it (its decoded form is the same document). A path
// whose encoded slashes would make it the prefix is not stripped as if it
// were.
func TestAPIServiceDiscoveryPathTricks(t *testing.T) {
	up := newPathUpstream(t)
	srv := httptest.NewServer(upstreamHandler(config{upstream: up.url, apiService: dashboard}, http.DefaultTransport, logr.Discard()))
	t.Cleanup(srv.Close)
	const prefix = "/apis/dashboard.example.com/v1"
	for _, c := range []struct {
		method, target string
		want           int
		discovery      bool
	}{
		{"GET", prefix, 200, true},
		{"GET", prefix + "?timeout=32s", 200, true}, // as the aggregator asks it
		{"HEAD", prefix, 200, false},
		{"OPTIONS", prefix, 404, false},
		{"POST", prefix, 404, false},
		{"DELETE", prefix, 404, false},
		{"GET", "/" + prefix, 404, false},
		{"GET", "/apis%2Fdashboard.example.com%2Fv1", 200, true}, // the same document: harmless
		{"GET", "/apis%2Fdashboard.example.com%2Fv1/x", 404, false},
		{"GET", "/apis/dashboard.example.com/V1/x", 404, false},
		{"GET", "/APIS/dashboard.example.com/v1/x", 404, false},
	} {
		resp, body := rawRequest(t, srv, c.method, c.target)
		if resp.StatusCode != c.want || c.discovery != strings.Contains(body, `"kind":"APIResourceList"`) {
			t.Errorf("%s %s = %d %q, want %d (discovery %v)", c.method, c.target, resp.StatusCode, body, c.want, c.discovery)
		}
	}
	if got := up.reached(); len(got) != 0 {
		t.Errorf("the upstream was asked %q", got)
	}
}

// browserTarget is where a browser on kubectl proxy goes for a refresh
// URL: it reads a backslash as a slash and %2e as a dot, and removes dot
// segments.
func browserTarget(ref string) string {
	ref = strings.ReplaceAll(ref, `\`, "/")
	ref = regexp.MustCompile(`(?i)%2e`).ReplaceAllString(ref, ".")
	u, err := url.Parse(ref)
	if err != nil {
		return "unparseable " + ref
	}
	base, _ := url.Parse("http://localhost:8001/apis/dashboard.example.com/v1/go")
	r := base.ResolveReference(u)
	if r.Host != "localhost:8001" {
		return r.String()
	}
	return path.Clean(r.Path)
}

// Schemes other than the upstream's, backslashes, protocol-relative
// forms and markup in a Location: never a page that runs script or sends
// the browser to another origin.
func TestRedirectsCannotBecomeScriptOrAnotherOrigin(t *testing.T) {
	up := echoUpstream(t)
	srv := httptest.NewServer(upstreamHandler(config{upstream: up, apiService: dashboard}, http.DefaultTransport, logr.Discard()))
	t.Cleanup(srv.Close)
	const prefix = "/apis/dashboard.example.com/v1"
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, to := range []string{
		"javascript:alert(1)", "JavaScript:alert(1)", " javascript:alert(1)", "java\tscript:alert(1)",
		"data:text/html,<script>alert(1)</script>", "javascript://" + up.Host + "/%0aalert(1)",
		`/\evil.example`, `\\evil.example`, `/\/evil.example`, "///evil.example", `\/evil.example`,
		"https:evil.example", "http:/evil.example", "//" + up.Host + "@evil.example/",
		`/x"><script>alert(1)</script>`, `/x'><img src=x onerror=alert(1)>`, "/x;url=javascript:alert(1)", // the refresh URL is all after the first url=: a path
		"/x\r\nSet-Cookie: a=b",
	} {
		resp, err := client.Get(srv.URL + prefix + "/go?to=" + url.QueryEscape(to))
		if err != nil && strings.Contains(err.Error(), "failed to parse Location") {
			continue // passed on as the redirect it was: the aggregator answers 502
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("%q: a Set-Cookie reached the browser", to)
		}
		if resp.StatusCode != 200 {
			continue // left as it was: the aggregator answers 502
		}
		refresh := strings.TrimPrefix(resp.Header.Get("Refresh"), "0; url=")
		if got := browserTarget(refresh); got != prefix && !strings.HasPrefix(got, prefix+"/") {
			t.Errorf("%q: a page sending the browser to %q (%s)", to, refresh, got)
		}
		if low := strings.ToLower(string(body)); strings.Contains(low, "<script") || strings.Contains(low, "<img") || strings.Contains(low, `"0; url=javascript:`) || strings.Contains(low, `href="javascript:`) {
			t.Errorf("%q: markup or script in the page: %s", to, body)
		}
	}
}

// Methods as a browser or an attacker may spell them: only GET, HEAD and
// OPTIONS exactly are safe; a lowercase "post", CONNECT and custom
// methods are checked like POST.
func TestCrossSiteCheckCoversEveryUnsafeMethod(t *testing.T) {
	c, err := parse("--audience", "a")
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	srv := httptest.NewServer(originGuarded(t, c, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ })))
	t.Cleanup(srv.Close)
	for _, m := range []string{"post", "Post", "get", "CONNECT", "PROPFIND", "MKCOL", "X-CUSTOM", "TRACE"} {
		for _, hdr := range []string{"Sec-Fetch-Site: cross-site\r\nOrigin: https://evil.example", "Origin: https://evil.example", "Origin: null", "Sec-Fetch-Site: same-site\r\nOrigin: http://localhost:8002"} {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			before := reached
			fmt.Fprintf(conn, "%s /notes HTTP/1.1\r\nHost: addon\r\n%s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", m, hdr)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			conn.Close()
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || reached != before {
				t.Errorf("%s with %q: %d, reached %v; want 403", m, hdr, resp.StatusCode, reached > before)
			}
		}
	}
}
