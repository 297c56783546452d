package vault

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/authvault/authvault/login"
)

func TestAuthorizationHeader(t *testing.T) {
	tests := []struct {
		info login.ConnectionInfo
		want string
	}{
		{login.ConnectionInfo{Token: "t"}, "Bearer t"},
		{login.ConnectionInfo{Scheme: "Negotiate"}, "Negotiate"},
		{login.ConnectionInfo{Scheme: "Custom", Token: "t"}, "Custom t"},
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
	v.addBase(base{"https", "a:6443", ""})
	v.addBase(base{"https", "b", "/k8s/clusters/c-1"})
	v.mu.Unlock()
	for _, tt := range tests {
		su, _ := url.Parse(tt.server)
		r := &route{scheme: su.Scheme, host: su.Host, prefix: strings.TrimSuffix(su.EscapedPath(), "/")}
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
