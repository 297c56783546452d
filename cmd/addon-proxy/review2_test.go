package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

func TestTrustedOriginsOddSpellings(t *testing.T) {
	for _, flag := range []string{
		"http://[::1", ":x", "%zz", "http://a b", "http://x:port", // url.Parse fails: must not panic
		"http://u@localhost:8001", "http://u@x:80", // userinfo
		"http://caf%C3%A9.example", "http://[fe80::1%25en0]", // escapes Parse decodes
		"http://x#", "http://x?", "http://x:70000",
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("--trusted-origins %q: panic: %v", flag, p)
				}
			}()
			c, err := parse("--audience", "a", "--trusted-origins", flag)
			switch {
			case err == nil:
				t.Errorf("--trusted-origins %q accepted as %q: no browser sends it", flag, c.trustedOrigins)
			case !strings.Contains(err.Error(), "--trusted-origins"):
				t.Errorf("--trusted-origins %q: %v does not name the flag", flag, err)
			}
		}()
	}
	for flag, want := range map[string]string{
		"http://[::1]:80":       "http://[::1]",
		"HTTP://X:443":          "http://x:443",
		"https://[0:0::1]:8443": "https://[::1]:8443",
		"http://localhost:0080": "http://localhost",
	} {
		c, err := parse("--audience", "a", "--trusted-origins", flag)
		if err != nil || len(c.trustedOrigins) != 1 || c.trustedOrigins[0] != want {
			t.Errorf("--trusted-origins %q = %q, %v; want %q", flag, c.trustedOrigins, err, want)
		}
	}
}

// RBAC and the app must read one path: servlet containers read "..;x"
// as "..", nginx merges "//".
func TestAPIServiceServletDotSegmentsDoNotReachTheUpstream(t *testing.T) {
	up := newPathUpstream(t)
	srv := httptest.NewServer(upstreamHandler(config{upstream: up.url, apiService: dashboard}, http.DefaultTransport, logr.Discard()))
	t.Cleanup(srv.Close)
	const prefix = "/apis/dashboard.example.com/v1"
	for _, target := range []string{
		prefix + "/namespaces/ns/notes/..;",
		prefix + "/namespaces/ns/notes/..;jsessionid=x",
		prefix + "/namespaces/ns/notes/%2e%2e;",
		prefix + "/notes/.;/x",
		prefix + "/notes//admin",
	} {
		resp, _ := rawRequest(t, srv, "GET", target)
		if got := up.reached(); len(got) != 0 {
			t.Errorf("GET %s = %d: the upstream was asked %q", target, resp.StatusCode, got)
		}
	}
}

func TestSendOnPageIsNotEncoded(t *testing.T) {
	up, _ := url.Parse("http://127.0.0.1:8080")
	resp := &http.Response{
		StatusCode: http.StatusFound,
		Header:     http.Header{"Location": {"/x"}, "Content-Encoding": {"gzip"}},
		Body:       io.NopCloser(strings.NewReader("\x1f\x8b\x08\x00")),
		Request:    &http.Request{URL: &url.URL{Path: "/go"}},
	}
	sendOn(resp, "/apis/dashboard.example.com/v1", up)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" {
		t.Errorf("the page is plain HTML, yet says Content-Encoding %q", ce)
	}
}

func TestRedirectsEndingInADotSegmentKeepTheirSlash(t *testing.T) {
	const prefix = "/apis/dashboard.example.com/v1"
	up, _ := url.Parse("http://127.0.0.1:8080")
	for loc, want := range map[string]string{
		prefix + "/notes/..":     prefix + "/",
		prefix + "/notes/%2e%2e": prefix + "/",
		prefix + "/notes/.":      prefix + "/notes/",
	} {
		if got, ok := keepUnderPrefix(http.Header{"Location": {loc}}, prefix, up, &url.URL{Path: "/go"}); !ok || got != want {
			t.Errorf("Location %q = %q, %v; want %q, where a browser goes", loc, got, ok, want)
		}
	}
}

func TestAPIServiceRefusesAnUpstreamBasePath(t *testing.T) {
	fs := []string{"--audience", "a", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--apiservice", "dashboard.example.com/v1", "--upstream", "http://127.0.0.1:8080/app"}
	if _, err := parse(fs...); err == nil || !strings.Contains(err.Error(), "--upstream") {
		t.Errorf("--apiservice with an upstream base path: %v; want refused, naming --upstream", err)
	}
}

func TestRedirectsToTheUpstreamByItsDefaultPort(t *testing.T) {
	const prefix = "/apis/dashboard.example.com/v1"
	up, _ := url.Parse("http://localhost:80")
	for _, loc := range []string{"http://localhost/x", "http://LOCALHOST:80/x"} {
		if got, ok := keepUnderPrefix(http.Header{"Location": {loc}}, prefix, up, &url.URL{Path: "/go"}); !ok || got != prefix+"/x" {
			t.Errorf("Location %q = %q, %v; want %q", loc, got, ok, prefix+"/x")
		}
	}
}
