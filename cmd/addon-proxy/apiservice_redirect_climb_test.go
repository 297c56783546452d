package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// A redirect kept as a page sends the browser under the prefix, and
// nowhere else: not to another host, not to another scheme, and not
// (through dot segments, plain or encoded, which the browser resolves)
// to another path of kubectl proxy's origin, where the person's
// credentials open the whole API (/api/v1/secrets) and every other
// service proxied there. The upstream's redirect of "/apis/G/V/../../.."
// "knows its prefix" and is passed on as it is.
func TestRedirectsCannotClimbOutOfThePrefix(t *testing.T) {
	up := echoUpstream(t)
	srv := httptest.NewServer(upstreamHandler(config{upstream: up, apiService: dashboard}, http.DefaultTransport, logr.Discard()))
	t.Cleanup(srv.Close)
	const prefix = "/apis/dashboard.example.com/v1"
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, to := range []string{
		prefix + "/../../../api/v1/secrets",
		prefix + "/%2e%2e/%2e%2e/%2e%2e/api/v1/secrets",
		"/%2e%2e/%2e%2e/%2e%2e/%2e%2e/api/v1/secrets",
		"%2e%2e/%2e%2e/%2e%2e/%2e%2e/api/v1/secrets",
		up.String() + prefix + "/../../../api/v1/secrets",
	} {
		resp, err := client.Get(srv.URL + prefix + "/go?to=" + url.QueryEscape(to))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			continue // left for the aggregator to refuse (502)
		}
		refresh := strings.TrimPrefix(resp.Header.Get("Refresh"), "0; url=")
		if got := browserTarget(refresh); got != prefix && !strings.HasPrefix(got, prefix+"/") {
			t.Errorf("a redirect to %q became a page sending the browser to %q, which it opens as %s: outside the prefix", to, refresh, got)
		}
	}
}
