package vault

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

func TestAuthorizationHeader(t *testing.T) {
	tests := []struct {
		info login.ConnectionInfo
		want string
	}{
		{login.ConnectionInfo{Token: "t"}, "Bearer t"},
		{login.ConnectionInfo{Scheme: "Negotiate"}, "Negotiate"},
		{login.ConnectionInfo{Scheme: "Custom", Token: "t"}, "Custom t"},
		{login.ConnectionInfo{Scheme: "Basic", Token: "dXNlcg=="}, "Basic dXNlcg=="},
		{login.ConnectionInfo{Username: "u", Password: "p"}, "Basic dTpw"},
		{login.ConnectionInfo{}, ""},
	}
	for _, tt := range tests {
		if got := authorization(&tt.info); got != tt.want {
			t.Errorf("authorization(%v) = %q, want %q", tt.info, got, tt.want)
		}
	}
}

func TestTargetKeepsThePathBelowTheServer(t *testing.T) {
	tests := []struct {
		server, request, want string
	}{
		{"https://a:6443", "https://a:6443/api/v1/pods?watch=1", "https://a:6443/api/v1/pods?watch=1"},
		{"https://b/k8s/clusters/c-1", "https://a:6443/api/v1/pods?watch=1", "https://b/k8s/clusters/c-1/api/v1/pods?watch=1"},
		{"https://b/k8s/clusters/c-1/", "https://a:6443/api/v1/namespaces/a%2Fb", "https://b/k8s/clusters/c-1/api/v1/namespaces/a%2Fb"},
		{"https://a:6443", "https://b/k8s/clusters/c-1/api", "https://a:6443/api"},
	}
	v, _ := testVault(t, Options{})
	v.mu.Lock()
	v.addBaseLocked(base{"https", "a:6443", ""})
	v.addBaseLocked(base{"https", "b", "/k8s/clusters/c-1"})
	v.mu.Unlock()
	for _, tt := range tests {
		su, _ := url.Parse(tt.server)
		r := &route{base: base{scheme: su.Scheme, host: su.Host, prefix: strings.TrimSuffix(su.EscapedPath(), "/")}}
		u, _ := url.Parse(tt.request)
		_, rel, ok := v.match(u)
		if !ok {
			t.Fatalf("%s is not below a known server", tt.request)
		}
		if got := r.target(u, rel).String(); got != tt.want {
			t.Errorf("target(%s via %s) = %s, want %s", tt.request, tt.server, got, tt.want)
		}
	}
	// A path that only starts like the prefix is not below it.
	if _, _, ok := v.match(&url.URL{Scheme: "https", Host: "b", Path: "/k8s/clusters/c-10/api"}); ok {
		t.Error("/k8s/clusters/c-10 matched the prefix /k8s/clusters/c-1")
	}
}

// countingRT authenticates by itself, as client-go's auth-provider
// transports do.
type countingRT struct {
	calls atomic.Int64
	seen  atomic.Pointer[http.Request]
}

func (c *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	c.seen.Store(req)
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

func TestOwnTransportIsUsedAsItIs(t *testing.T) {
	rt := &countingRT{}
	v := New(Options{})
	defer v.Close()
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: "https://own.example/prefix", Transport: rt}))
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, cfg.Host+"/api", nil)
	if _, err := v.Transport().RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	got := rt.seen.Load()
	if rt.calls.Load() != 1 || got.URL.String() != "https://own.example/prefix/api" || got.Header.Get("Authorization") != "" {
		t.Errorf("own transport saw %v with %q, want one routed request and no header of ours", got.URL, got.Header.Get("Authorization"))
	}
}

func TestUnreadableCertificateFailsTheLogin(t *testing.T) {
	v, _ := testVault(t, Options{})
	missing := filepath.Join(t.TempDir(), "client.crt")
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: "https://a", CertificatePath: missing, PrivateKeyPath: missing}),
		login.ID("files"), login.Retries(0))
	le := selectErr(t, v)
	if !errors.Is(le, os.ErrNotExist) || !strings.Contains(le.Error(), "reading CertificatePath") || !strings.Contains(le.Error(), missing) {
		t.Errorf("LoginError = %v, want the unreadable file named", le)
	}
	garbage := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	v2, _ := testVault(t, Options{})
	v2.OnLogin(handlerOf(login.ConnectionInfo{Server: "https://a", CAPath: garbage}), login.Retries(0))
	if le := selectErr(t, v2); !strings.Contains(le.Error(), "CAPath") || !strings.Contains(le.Error(), "neither PEM nor base64") {
		t.Errorf("LoginError = %v, want the CA file's problem named", le)
	}
}

// A path that climbs out of its server's path prefix once dot segments are
// resolved, however it spells them, carries no credential: with a server
// https://h/k8s/clusters/c-1, /k8s/clusters/c-1/../c-2 is c-2's.
func TestDotSegmentsDoNotLeaveThePrefix(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // request URI: Authorization
	ca := testpki.NewCA(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.RequestURI] = r.Header.Get("Authorization")
		mu.Unlock()
	}))
	srv.TLS = ca.ServerTLS(t, "api", nil)
	srv.StartTLS()
	defer srv.Close()
	prefix := srv.URL + "/k8s/clusters/c-1"
	v := New(Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: prefix, CAData: ca.PEM, Token: "c-1-token"}))

	below := []string{
		"/api/v1/pods",
		"",
		"/api/v1/namespaces/a%3Ab/pods",
		"/api/v1/../v1/pods", // down and up again, still below
		"/api/v1/namespaces/..data",
		"/api/.../x",
	}
	escaping := []string{
		"/../c-2/api",
		"/./../c-2/api",
		"/%2e%2e/c-2/api",
		"/%2E%2e/c-2/api",
		"/..%2Fc-2/api",
		"/..%2fc-2/api",
		"/%252e%252e/c-2/api",
		"/%25252e%25252e/c-2/api",
		"/..%5Cc-2/api",
		"/..;/c-2/api",
		"/api/../../c-2/api",
		"/api/v1/%2e%2e/%2e%2e/%2e%2e/c-2",
	}
	for _, tc := range []struct {
		paths    []string
		wantAuth string
	}{{below, "Bearer c-1-token"}, {escaping, ""}} {
		for _, p := range tc.paths {
			u, err := url.Parse(prefix + p)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: v.Transport()}).Do(&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}})
			if err != nil {
				// No credential: the default transport does not trust the
				// test CA, so the request fails before it is sent.
				if tc.wantAuth == "" {
					continue
				}
				t.Fatalf("GET %s: %v", p, err)
			}
			resp.Body.Close()
			mu.Lock()
			auth, seen := got[u.RequestURI()]
			mu.Unlock()
			if !seen || auth != tc.wantAuth {
				t.Errorf("GET %s: server saw Authorization %q (request seen: %v), want %q", p, auth, seen, tc.wantAuth)
			}
		}
	}
}

// A URL with an opaque part is below no server, whatever its Host and Path:
// the request line is built from Opaque, so "/k8s/clusters/c-2/api" or
// "//other-host/api" there would send c-1's credential to another cluster
// or host.
func TestOpaqueURLIsBelowNoServer(t *testing.T) {
	b := base{scheme: "https", host: "rancher", prefix: "/k8s/clusters/c-1"}
	for _, opaque := range []string{"/k8s/clusters/c-2/api", "//other-host/api", "//rancher/k8s/clusters/c-1/api"} {
		u := &url.URL{Scheme: "https", Host: "rancher", Path: "/k8s/clusters/c-1/api", Opaque: opaque}
		if rel, ok := b.relative(u); ok {
			t.Errorf("Opaque %q: relative() = %q, true; want it below no server (request URI %q)", opaque, rel, u.RequestURI())
		}
	}
	if _, ok := b.relative(&url.URL{Scheme: "https", Host: "rancher", Path: "/k8s/clusters/c-1/api"}); !ok {
		t.Error("the same URL without Opaque is not below its server")
	}
}
