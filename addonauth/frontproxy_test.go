package addonauth

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/authvault/authvault/testkit/testpki"
)

// frontSetup is an Authenticator with a FrontProxy in front of a
// recorder, served over TLS that asks for (and does not verify) client
// certificates, as addon-proxy serves.
type frontSetup struct {
	api  *fakeAPI
	auth *Authenticator
	up   *recorder
	srv  *httptest.Server
	ca   *testpki.CA // signs the server's certificate

	mu   sync.Mutex
	logs bytes.Buffer
	used map[*http.Client]bool // see connUsed
}

func newFrontSetup(t *testing.T, fp FrontProxy, opts Options) *frontSetup {
	t.Helper()
	s := &frontSetup{api: newFakeAPI(t), up: &recorder{}, ca: testpki.NewCA(t)}
	opts.Audience = audience
	opts.Config = s.api.config()
	opts.FrontProxy = &fp
	opts.Logger = funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.logs.WriteString(prefix + args + "\n")
	}, funcr.Options{Verbosity: 1})
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.auth = a
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	s.srv = httptest.NewUnstartedServer(a.Middleware(s.up))
	s.srv.TLS = s.ca.ServerTLS(t, "addon-proxy", nil)
	s.srv.TLS.ClientAuth = tls.RequestClientCert
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *frontSetup) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// client is an HTTPS client of the server presenting a certificate of ca
// for cn; none when ca is nil.
func (s *frontSetup) client(t *testing.T, ca *testpki.CA, cn string) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: s.ca.Pool}
	if ca != nil {
		certPEM, keyPEM := ca.Issue(t, cn, false)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// get sends GET /hello with headers through c.
func (s *frontSetup) get(t *testing.T, c *http.Client, headers http.Header) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/hello", nil)
	for k, v := range headers {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// aggregator is what the API server's aggregation layer sends for alice.
var aggregator = http.Header{
	"X-Remote-User":             {"alice"},
	"X-Remote-Uid":              {"uid-alice"},
	"X-Remote-Group":            {"devs", "system:authenticated"},
	"X-Remote-Extra-Scopes%2fa": {"read"},
}

func writeCA(t *testing.T, pems ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "requestheader-ca.crt")
	if err := os.WriteFile(path, bytes.Join(pems, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFrontProxyCallerReachesTheUpstreamAsItsUser(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM), AllowedNames: []string{"front-proxy-client"},
		UIDHeaders: []string{"X-Remote-Uid"}}, Options{})
	resp, body := s.get(t, s.client(t, proxyCA, "front-proxy-client"), aggregator)
	if resp.StatusCode != 200 || body != "hello alice" {
		t.Fatalf("GET = %d %q, want 200 greeting alice; log:\n%s", resp.StatusCode, body, s.log())
	}
	h, u := s.up.seen[0], s.up.user[0]
	if got := h.Values("X-Authenticated-Groups"); strings.Join(got, ",") != "devs,system:authenticated" {
		t.Errorf("groups = %v", got)
	}
	if h.Get("X-Authenticated-UID") != "uid-alice" || h.Get("X-Authenticated-Extra-Scopes%2Fa") != "read" {
		t.Errorf("forwarded UID %q, extra %v", h.Get("X-Authenticated-UID"), h)
	}
	for name := range h {
		if strings.HasPrefix(strings.ToLower(name), "x-remote-") {
			t.Errorf("%s reached the upstream", name)
		}
	}
	if u.Name != "alice" || u.UID != "uid-alice" || strings.Join(u.Extra["scopes/a"], ",") != "read" {
		t.Errorf("UserFrom = %+v", u)
	}
	if n := s.api.reviews.Load() + s.api.keyFetches.Load() + s.api.accessReviews.Load() + s.api.discoveries.Load(); n != 0 {
		t.Errorf("%d API calls for a front-proxy caller, want 0", n)
	}
}

// X-Remote-User is the API server's word only over its front proxy's
// certificate: every other way in, it is dropped, and the caller is a
// bearer caller.
func TestFrontProxyHeadersAreTrustedOnlyFromItsCertificate(t *testing.T) {
	proxyCA, otherCA := testpki.NewCA(t), testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM), AllowedNames: []string{"front-proxy-client"}}, Options{})
	plain := httptest.NewServer(s.auth.Middleware(s.up))
	t.Cleanup(plain.Close)
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"plain HTTP", http.DefaultClient, plain.URL},
		{"TLS without a client certificate", s.client(t, nil, ""), s.srv.URL},
		{"a certificate of another CA", s.client(t, otherCA, "front-proxy-client"), s.srv.URL},
		{"the CA, a name not allowed", s.client(t, proxyCA, "mallory"), s.srv.URL},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := s.up.count()
			req, _ := http.NewRequest(http.MethodGet, c.url+"/hello", nil)
			req.Header = aggregator.Clone()
			resp, err := c.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || s.up.count() != before {
				t.Fatalf("without a token: %d, upstream reached %d times; want 401 and none", resp.StatusCode, s.up.count()-before)
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err = c.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "hello system:serviceaccount:team-a:client" {
				t.Fatalf("with a token: %d %q, want the token's user", resp.StatusCode, body)
			}
			if u := s.up.user[s.up.count()-1]; u.Name != "system:serviceaccount:team-a:client" || len(u.Extra) > 0 {
				t.Errorf("UserFrom = %+v", u)
			}
		})
	}
}

// A rotated CA file is trusted without a restart, and the one it
// replaced is refused.
func TestFrontProxyCAFileIsFollowed(t *testing.T) {
	oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
	file := writeCA(t, oldCA.PEM)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: file}, Options{})
	if resp, _ := s.get(t, s.client(t, oldCA, "front-proxy-client"), aggregator); resp.StatusCode != 200 {
		t.Fatalf("old CA before the rotation: %d", resp.StatusCode)
	}
	if err := os.WriteFile(file+".new", newCA.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new CA to be trusted", func() bool {
		resp, _ := s.get(t, s.client(t, newCA, "front-proxy-client"), aggregator)
		return resp.StatusCode == 200
	})
	if resp, _ := s.get(t, s.client(t, oldCA, "front-proxy-client"), aggregator); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("old CA after the rotation: %d, want 401", resp.StatusCode)
	}
}

func TestNewRefusesABadFrontProxy(t *testing.T) {
	api := newFakeAPI(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.crt")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, fp := range map[string]FrontProxy{
		"a missing file":         {ClientCAFile: filepath.Join(dir, "missing.crt")},
		"a directory":            {ClientCAFile: dir},
		"not PEM":                {ClientCAFile: garbage},
		"names without the file": {AllowedNames: []string{"front-proxy-client"}},
	} {
		if _, err := New(Options{Audience: audience, Config: api.config(), FrontProxy: &fp}); err == nil {
			t.Errorf("%s: New accepted it", name)
		} else if !strings.Contains(err.Error(), "FrontProxy") {
			t.Errorf("%s: %v does not name FrontProxy", name, err)
		}
	}
}

// authConfigMap is the ConfigMap kube-apiserver publishes, trusting ca.
func authConfigMap(caPEM []byte, allowed string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"},
		Data: map[string]string{
			"requestheader-client-ca-file":       string(caPEM),
			"requestheader-allowed-names":        allowed,
			"requestheader-username-headers":     `["X-Remote-User"]`,
			"requestheader-uid-headers":          `["X-Remote-Uid"]`,
			"requestheader-group-headers":        `["X-Remote-Group"]`,
			"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		}}
}

// The ConfigMap is followed: missing, malformed or deleted, front-proxy
// callers get 503 and the log says which; a rotated CA is trusted and
// the old one refused; bearer callers are served all along.
func TestFrontProxyConfigMapIsFollowed(t *testing.T) {
	oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
	client := fake.NewClientset()
	s := newFrontSetup(t, FrontProxy{}, Options{frontProxyClient: client})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	bearer := http.Header{"Authorization": {"Bearer " + tok}}
	cms := client.CoreV1().ConfigMaps("kube-system")
	ctx := context.Background()
	expect := func(what string, ca *testpki.CA, want int) {
		t.Helper()
		waitFor(t, what, func() bool {
			resp, _ := s.get(t, s.client(t, ca, "front-proxy-client"), aggregator)
			return resp.StatusCode == want
		})
		if resp, _ := s.get(t, s.client(t, ca, "front-proxy-client"), bearer); resp.StatusCode != 200 {
			t.Errorf("%s: a bearer caller with a client certificate got %d", what, resp.StatusCode)
		}
	}
	expect("503 while the ConfigMap is missing", oldCA, http.StatusServiceUnavailable)
	waitFor(t, "the log to say it is missing", func() bool { return strings.Contains(s.log(), "does not exist") })

	if _, err := cms.Create(ctx, authConfigMap(oldCA.PEM, `["front-proxy-client"]`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("the CA to be trusted once published", oldCA, 200)
	if resp, _ := s.get(t, s.client(t, oldCA, "mallory"), aggregator); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a name the ConfigMap does not allow: %d, want 401", resp.StatusCode)
	}

	// Rotation: both for a while, then the new one alone.
	if _, err := cms.Update(ctx, authConfigMap(append(append([]byte{}, oldCA.PEM...), newCA.PEM...), `["front-proxy-client"]`), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("the new CA to be trusted beside the old", newCA, 200)
	expect("the old CA still trusted in the bundle", oldCA, 200)
	if _, err := cms.Update(ctx, authConfigMap(newCA.PEM, `["front-proxy-client"]`), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("the old CA refused once removed", oldCA, http.StatusUnauthorized)
	expect("the new CA trusted alone", newCA, 200)

	for _, bad := range []struct{ name, key, value, log string }{
		{"a CA that is not PEM", "requestheader-client-ca-file", "garbage", "requestheader-client-ca-file"},
		{"allowed names that are not JSON", "requestheader-allowed-names", "front-proxy-client", "requestheader-allowed-names is not a JSON list"},
		{"no CA", "requestheader-client-ca-file", "", "no requestheader-client-ca-file"},
	} {
		cm := authConfigMap(newCA.PEM, `["front-proxy-client"]`)
		cm.Data[bad.key] = bad.value
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		expect(bad.name+": 503", newCA, http.StatusServiceUnavailable)
		if !strings.Contains(s.log(), bad.log) {
			t.Errorf("%s: the log does not say %q:\n%s", bad.name, bad.log, s.log())
		}
		if _, err := cms.Update(ctx, authConfigMap(newCA.PEM, `["front-proxy-client"]`), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		expect(bad.name+": trusted again once fixed", newCA, 200)
	}

	if err := cms.Delete(ctx, "extension-apiserver-authentication", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("503 once the ConfigMap is deleted", newCA, http.StatusServiceUnavailable)
	if !strings.Contains(s.log(), "was deleted") {
		t.Errorf("the log does not say the ConfigMap was deleted:\n%s", s.log())
	}
}

// A ConfigMap the proxy may not read: 503, and the log says why.
func TestFrontProxyConfigMapUnreadable(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "extension-apiserver-authentication", nil)
	})
	s := newFrontSetup(t, FrontProxy{}, Options{frontProxyClient: client})
	ca := testpki.NewCA(t)
	waitFor(t, "the log to say it cannot be read", func() bool { return strings.Contains(s.log(), "cannot be read") })
	if !strings.Contains(s.log(), "forbidden") {
		t.Errorf("the log does not say forbidden:\n%s", s.log())
	}
	if resp, body := s.get(t, s.client(t, ca, "front-proxy-client"), aggregator); resp.StatusCode != http.StatusServiceUnavailable || s.up.count() != 0 {
		t.Errorf("GET = %d %q, upstream reached %d times; want 503 and none", resp.StatusCode, body, s.up.count())
	}
}

// Without Start nothing is read: 503, never open.
func TestFrontProxyBeforeStart(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), FrontProxy: &FrontProxy{}, frontProxyClient: fake.NewClientset(authConfigMap(testpki.NewCA(t).PEM, ""))})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "https://addon/hello", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: nil}
	if _, _, err := a.identify(r); err == nil {
		t.Error("a request with no certificate and no token was identified")
	}
	if err := a.Start(canceled()); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(canceled()); err == nil {
		t.Error("a second Start was accepted")
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }
