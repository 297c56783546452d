package main

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var dashboard = schema.GroupVersion{Group: "dashboard.example.com", Version: "v1"}

// An upstream that echoes the path it was asked for, and redirects /go
// to the Location its query names.
func echoUpstream(t *testing.T) *url.URL {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/go" {
			w.Header().Set("Location", r.URL.Query().Get("to"))
			w.WriteHeader(http.StatusSeeOther)
			return
		}
		_, _ = io.WriteString(w, "path "+r.URL.Path+" raw "+r.URL.RawPath)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

func TestAPIServiceAnswersDiscoveryAndStripsItsPrefix(t *testing.T) {
	up := echoUpstream(t)
	c := config{upstream: up, apiService: dashboard}
	srv := httptest.NewServer(upstreamHandler(c, http.DefaultTransport, logr.Discard()))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header
	}

	code, body, h := get("/apis/dashboard.example.com/v1")
	var list metav1.APIResourceList
	if code != 200 || h.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &list) != nil ||
		list.Kind != "APIResourceList" || list.GroupVersion != "dashboard.example.com/v1" || list.APIResources == nil {
		t.Errorf("discovery = %d %s %q, want an APIResourceList of the group-version", code, h.Get("Content-Type"), body)
	}
	for path, want := range map[string]string{
		"/apis/dashboard.example.com/v1/":             "path / raw ",
		"/apis/dashboard.example.com/v1/notes":        "path /notes raw ",
		"/apis/dashboard.example.com/v1/static/x.css": "path /static/x.css raw ",
	} {
		if code, body, _ := get(path); code != 200 || body != want {
			t.Errorf("GET %s = %d %q, want %q", path, code, body, want)
		}
	}
	for _, path := range []string{"/apis/dashboard.example.com/v1/a%2Fb/c", "/", "/apis", "/apis/dashboard.example.com", "/apis/dashboard.example.com/v1beta1/x", "/apis/dashboard.example.com/v1x", "/notes"} {
		if code, body, _ := get(path); code != http.StatusNotFound {
			t.Errorf("GET %s = %d %q, want 404: not the APIService's", path, code, body)
		}
	}
}

// The aggregation layer answers every redirect with 502: one that stays
// in the app reaches the browser as a page that sends it on, under the
// prefix; one that leaves it is left for the aggregator to refuse.
func TestRedirectsStayUnderThePrefix(t *testing.T) {
	up := echoUpstream(t)
	srv := httptest.NewServer(upstreamHandler(config{upstream: up, apiService: dashboard}, http.DefaultTransport, logr.Discard()))
	t.Cleanup(srv.Close)
	const prefix = "/apis/dashboard.example.com/v1"
	for to, want := range map[string]string{
		"/":                       prefix + "/",
		"/notes?x=1#top":          prefix + "/notes?x=1#top",
		up.String() + "/done":     prefix + "/done",
		"notes":                   prefix + "/notes",
		"../../../api/v1/secrets": prefix + "/api/v1/secrets", // resolved in the app's paths: no climbing out
	} {
		resp, err := http.Get(srv.URL + prefix + "/go?to=" + url.QueryEscape(to))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Relative to the page the browser asked for, whatever address
		// it knows that page by (kubectl proxy's).
		ref := strings.TrimPrefix(resp.Header.Get("Refresh"), "0; url=")
		page, _ := url.Parse("http://localhost:8001" + prefix + "/go")
		u, err := url.Parse(ref)
		if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(ref, "/") {
			t.Errorf("a redirect to %q: Refresh %q is not a relative reference", to, ref)
			continue
		}
		got := strings.TrimPrefix(page.ResolveReference(u).String(), "http://localhost:8001")
		if resp.StatusCode != 200 || resp.Header.Get("Location") != "" || got != want ||
			!strings.Contains(string(body), `content="0; url=`+html.EscapeString(ref)+`"`) || !strings.Contains(string(body), `<a href="`+html.EscapeString(ref)+`">`) {
			t.Errorf("a redirect to %q reached the caller as %d, Refresh %q (%s), body %q; want 200 sending it to %q", to, resp.StatusCode, ref, got, body, want)
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, to := range []string{"/a%2Fb", "https://elsewhere.test/x", "//elsewhere.test/x", "mailto:someone@example.com"} {
		resp, err := client.Get(srv.URL + prefix + "/go?to=" + url.QueryEscape(to))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || got != to {
			t.Errorf("a redirect to %q reached the caller as %d %q, want it as it was", to, resp.StatusCode, got)
		}
	}
}

func TestFrontProxyFlags(t *testing.T) {
	tls := []string{"--audience", "a", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}
	c, err := parse(append(tls, "--apiservice", "dashboard.example.com/v1")...)
	if err != nil {
		t.Fatal(err)
	}
	if c.apiService != dashboard || c.auth.FrontProxy == nil || c.auth.FrontProxy.ClientCAFile != "" {
		t.Errorf("--apiservice: %v, front proxy %+v; want the group-version and the ConfigMap", c.apiService, c.auth.FrontProxy)
	}
	c, err = parse(append(tls, "--requestheader-client-ca-file", "ca.pem", "--requestheader-allowed-names", "front-proxy-client,aggregator",
		"--requestheader-username-headers", "X-Remote-User", "--authentication-skip-lookup")...)
	if err != nil {
		t.Fatal(err)
	}
	if fp := c.auth.FrontProxy; fp == nil || fp.ClientCAFile != "ca.pem" || strings.Join(fp.AllowedNames, ",") != "front-proxy-client,aggregator" {
		t.Errorf("front proxy = %+v", fp)
	}
	if c, err := parse("--audience", "a"); err != nil || c.auth.FrontProxy != nil || strings.Join(c.trustedOrigins, ",") != "http://localhost:8001,http://127.0.0.1:8001" {
		t.Errorf("defaults: %v, front proxy %+v, trusted origins %q", err, c.auth.FrontProxy, c.trustedOrigins)
	}
	if c, err := parse("--audience", "a", "--trusted-origins", "https://dash.example.com", "--trusted-origins", "http://localhost:9000"); err != nil ||
		strings.Join(c.trustedOrigins, ",") != "https://dash.example.com,http://localhost:9000" {
		t.Errorf("--trusted-origins given: %v %q, want only those given", err, c.trustedOrigins)
	}
	if c, err := parse("--audience", "a", "--trusted-origins="); err != nil || len(c.trustedOrigins) != 0 {
		t.Errorf("--trusted-origins empty: %v %q, want none", err, c.trustedOrigins)
	}
	for _, bad := range []struct {
		args []string
		says string
	}{
		{append(tls, "--apiservice", "v1"), "GROUP/VERSION"},
		{append(tls, "--apiservice", "dashboard.example.com/"), "GROUP/VERSION"},
		{append(tls, "--apiservice", "a/b/c"), "GROUP/VERSION"},
		{[]string{"--audience", "a", "--apiservice", "dashboard.example.com/v1"}, "--tls-cert-file"},
		{append(tls, "--requestheader-allowed-names", "front-proxy-client"), "go with --requestheader-client-ca-file"},
		{append(tls, "--apiservice", "dashboard.example.com/v1", "--authentication-skip-lookup"), "needs --requestheader-client-ca-file"},
		{[]string{"--audience", "a", "--trusted-origins", "localhost:8001"}, "--trusted-origins"},
		{[]string{"--audience", "a", "--authentication-skip-lookup"}, "goes with --apiservice"},
		{[]string{"--audience", "a", "--trusted-origins", "http://localhost:8001/path"}, "--trusted-origins"},
	} {
		if _, err := parse(bad.args...); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%q: %v, want an error that says %q", bad.args, err, bad.says)
		}
	}
}

// A browser's cross-site unsafe request never reaches the upstream; a
// program's (no Sec-Fetch-Site, no Origin), a same-origin page's and a
// trusted origin's do.
func TestCrossSiteUnsafeRequestsAreRefused(t *testing.T) {
	c, err := parse("--audience", "a")
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	srv := httptest.NewServer(originGuarded(t, c, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ })))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		method, site, origin string
		want                 int
	}{
		{"POST", "cross-site", "https://evil.example", 403},
		{"POST", "same-site", "http://localhost:9999", 403}, // another port of localhost: same site, another origin
		{"DELETE", "cross-site", "https://evil.example", 403},
		{"PUT", "", "https://evil.example", 403},
		{"PATCH", "", "null", 403},
		{"POST", "same-origin", "http://localhost:8001", 200},
		{"POST", "none", "", 200},                            // typed into the address bar
		{"POST", "", "http://127.0.0.1:8001", 200},           // a browser without Sec-Fetch-Site, on kubectl proxy
		{"POST", "cross-site", "http://localhost:8001", 200}, // a trusted origin
		{"POST", "", "", 200},                                // a program
		{"GET", "cross-site", "https://evil.example", 200},   // served, its answer kept from the page (no CORS headers reach it)
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+"/notes", strings.NewReader("text=x"))
		if tc.site != "" {
			req.Header.Set("Sec-Fetch-Site", tc.site)
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		before := reached
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want || (tc.want == 403) != (reached == before) {
			t.Errorf("%s Sec-Fetch-Site %q Origin %q: %d, upstream reached %v; want %d", tc.method, tc.site, tc.origin, resp.StatusCode, reached > before, tc.want)
		}
	}
}
