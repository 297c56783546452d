package addonauth

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// impersonationSeen is an API server that records the Impersonate-*
// headers and the credential of each request, and answers with the
// impersonated user's name.
type impersonationSeen struct {
	mu   sync.Mutex
	seen []http.Header // guarded by mu
}

func (s *impersonationSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := http.Header{}
	for name, values := range r.Header {
		if strings.HasPrefix(name, "Impersonate-") || name == "Authorization" {
			h[name] = values
		}
	}
	s.mu.Lock()
	s.seen = append(s.seen, h)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Success","message":%q}`, r.Header.Get("Impersonate-User"))
}

func (s *impersonationSeen) requests() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// actingOnRecorder is ActAsCaller's copy of a config with the service's
// token for an impersonationSeen server, and a context bounded by
// testwait.Hang, both ended with the test.
func actingOnRecorder(t *testing.T) (*impersonationSeen, *rest.Config, context.Context) {
	t.Helper()
	seen := &impersonationSeen{}
	srv := httptest.NewServer(seen)
	t.Cleanup(srv.Close)
	acting, err := ActAsCaller(&rest.Config{Host: srv.URL, BearerToken: "service-token"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	t.Cleanup(cancel)
	return seen, acting, ctx
}

// get makes one request through cfg with ctx and returns the name the
// server says was impersonated.
func get(ctx context.Context, t *testing.T, cfg *rest.Config) (string, error) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/api/v1/namespaces/a/configmaps", nil)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), nil
}

func TestActAsCallerSendsTheVerifiedCallerOnEachRequest(t *testing.T) {
	seen, acting, ctx := actingOnRecorder(t)

	for _, tc := range []struct {
		name string
		user User
		want http.Header
	}{{
		name: "a person: name, UID, groups but system:authenticated, every extra, its key escaped",
		user: User{Name: "alice@example.com", UID: "42", Groups: []string{"devs", "system:authenticated", "on call"},
			Extra: map[string][]string{"example.com/scopes": {"read", "list"}, "authentication.kubernetes.io/credential-id": {"X509SHA256=ab"}}},
		want: http.Header{
			"Authorization":                          {"Bearer service-token"},
			"Impersonate-User":                       {"alice@example.com"},
			"Impersonate-Uid":                        {"42"},
			"Impersonate-Group":                      {"devs", "on call"},
			"Impersonate-Extra-Example.com%2fscopes": {"read", "list"},
			"Impersonate-Extra-Authentication.kubernetes.io%2fcredential-Id": {"X509SHA256=ab"},
		},
	}, {
		name: "a ServiceAccount: its name alone, as constrained impersonation requires",
		user: User{Name: "system:serviceaccount:monitoring:prometheus", UID: "7",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"},
			Extra:  map[string][]string{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}},
		want: http.Header{"Authorization": {"Bearer service-token"}, "Impersonate-User": {"system:serviceaccount:monitoring:prometheus"}},
	}, {
		name: "a node: its name alone",
		user: User{Name: "system:node:worker-1", Groups: []string{"system:nodes", "system:authenticated"}},
		want: http.Header{"Authorization": {"Bearer service-token"}, "Impersonate-User": {"system:node:worker-1"}},
	}, {
		name: "a person with no groups but system:authenticated",
		user: User{Name: "bob", Groups: []string{"system:authenticated"}},
		want: http.Header{"Authorization": {"Bearer service-token"}, "Impersonate-User": {"bob"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(seen.requests())
			got, err := get(withUser(ctx, tc.user), t, acting)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tc.user.Name) {
				t.Errorf("answer %s, want it to name %q", got, tc.user.Name)
			}
			reqs := seen.requests()
			if len(reqs) != before+1 {
				t.Fatalf("%d requests reached the server, want 1", len(reqs)-before)
			}
			if got := reqs[before]; fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("headers sent:\n%v\nwant:\n%v", got, tc.want)
			}
		})
	}
}

// A request made without the context of a verified caller is never sent:
// not as the service, not as anyone; nor is one that names someone to
// impersonate itself.
func TestActAsCallerSendsNothingWithoutAVerifiedCaller(t *testing.T) {
	seen := &impersonationSeen{}
	srv := httptest.NewServer(seen)
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "service-token"}
	acting, err := ActAsCaller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()

	// No refusal names the service's credential, in any form.
	noSecret := func(err error) {
		t.Helper()
		if err != nil && strings.Contains(fmt.Sprintf("%v %+v %#v %s", err, err, err, err), "service-token") {
			t.Errorf("an error carries the service's token: %v", err)
		}
	}
	_, err = get(ctx, t, acting)
	noSecret(err)
	if !errors.Is(err, ErrNoCaller) {
		t.Errorf("a request with no caller in its context: error %v, want ErrNoCaller", err)
	}

	// The caller's own request carried identity headers of its choosing:
	// they are not in the context, and nothing copies them.
	forged := httptest.NewRequest(http.MethodGet, "/", nil)
	forged.Header.Set("X-Remote-User", "admin")
	forged.Header.Set("Impersonate-User", "admin")
	if _, err := get(forged.Context(), t, acting); !errors.Is(err, ErrNoCaller) {
		t.Errorf("a forged request's context: error %v, want ErrNoCaller", err)
	}

	client, err := rest.HTTPClientFor(acting)
	if err != nil {
		t.Fatal(err)
	}
	for _, header := range []string{"Impersonate-User", "impersonate-group", "Impersonate-Extra-Scopes", "Impersonate-Uid"} {
		body := &closeCounter{Reader: strings.NewReader("{}")}
		req, _ := http.NewRequestWithContext(withUser(ctx, User{Name: "alice"}), http.MethodPost, srv.URL+"/api/v1/namespaces", body)
		req.Header[header] = []string{"system:admin"}
		_, err := client.Do(req)
		noSecret(err)
		if err == nil || !strings.Contains(err.Error(), "already carries") {
			t.Errorf("a request that brings its own %s: error %v, want a refusal", header, err)
		}
		if body.closed.Load() != 1 {
			t.Errorf("the refused request's body was closed %d times, want once", body.closed.Load())
		}
	}
	if n := len(seen.requests()); n != 0 {
		t.Errorf("%d requests reached the server, want none: %v", n, seen.requests())
	}

	// The service's own config still acts as the service.
	if got, err := get(ctx, t, cfg); err != nil || strings.Contains(got, "alice") {
		t.Errorf("the original config: %q, %v; want the service's own request", got, err)
	}
	if h := seen.requests()[0]; len(h.Values("Impersonate-User")) != 0 {
		t.Errorf("the original config sent %v", h)
	}
}

type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

func TestActAsCallerRefusesAConfigThatImpersonates(t *testing.T) {
	for _, imp := range []rest.ImpersonationConfig{
		{UserName: "admin"}, {UID: "1"}, {Groups: []string{"system:masters"}}, {Extra: map[string][]string{"a": {"b"}}},
	} {
		if _, err := ActAsCaller(&rest.Config{Host: "https://example.invalid", Impersonate: imp}); err == nil {
			t.Errorf("a config impersonating %+v: no error", imp)
		}
	}
	if _, err := ActAsCaller(nil); err == nil {
		t.Error("a nil config: no error")
	}
}

// Many callers at once through one client: each request carries its own
// caller, never another's.
func TestActAsCallerKeepsConcurrentCallersApart(t *testing.T) {
	srv := httptest.NewServer(&impersonationSeen{})
	defer srv.Close()
	acting, err := ActAsCaller(&rest.Config{Host: srv.URL, BearerToken: "service-token", QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	clients, err := kubernetes.NewForConfig(acting)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			name := fmt.Sprintf("user-%d", i%7)
			result := clients.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/a/configmaps").Do(withUser(ctx, User{Name: name, Groups: []string{"g-" + name}}))
			raw, err := result.Raw()
			if err != nil {
				errs <- err
				return
			}
			if !strings.Contains(string(raw), `"`+name+`"`) {
				errs <- fmt.Errorf("%s's request was made as %s", name, raw)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Through a vault: the service's credential rotates under the caller's
// requests, and a request the API server refuses with 401 is sent again
// with the next credential, as the same caller.
func TestActAsCallerThroughAVaultKeepsTheCallerAcrossARotation(t *testing.T) {
	var revoked atomic.Value // the token the server refuses
	revoked.Store("")
	seen := &impersonationSeen{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+revoked.Load().(string) {
			http.Error(w, `{"kind":"Status","code":401}`, http.StatusUnauthorized)
			return
		}
		seen.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	var logins atomic.Int32
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: srv.URL, CAData: ca, Token: fmt.Sprintf("service-%d", logins.Add(1))}, nil
	}, login.ID("service"))
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acting, err := ActAsCaller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	alice := withUser(ctx, User{Name: "alice", Groups: []string{"devs"}})
	if got, err := get(alice, t, acting); err != nil || !strings.Contains(got, "alice") {
		t.Fatalf("first request: %q, %v", got, err)
	}
	revoked.Store("service-1")
	if got, err := get(alice, t, acting); err != nil || !strings.Contains(got, "alice") {
		t.Fatalf("request after the service's token was revoked: %q, %v", got, err)
	}
	reqs := seen.requests()
	last := reqs[len(reqs)-1]
	if last.Get("Authorization") == "Bearer service-1" || last.Get("Impersonate-User") != "alice" || last.Get("Impersonate-Group") != "devs" {
		t.Errorf("the replayed request sent %v, want a new service token and alice with her group", last)
	}
}

// A token whose review vouches for no name is no caller: the middleware
// refuses it, and a caller with no name in a context is never acted as
// (the API server takes an empty Impersonate-User as none, and the request
// would be the service's own).
func TestActAsCallerNeverActsAsTheServiceForAnEmptyName(t *testing.T) {
	api := newFakeAPI(t)
	api.accept("webhook-token", authnv1.UserInfo{Username: "", Groups: []string{"system:authenticated"}})
	seen := &impersonationSeen{}
	kube := httptest.NewServer(seen)
	defer kube.Close()
	acting, err := ActAsCaller(&rest.Config{Host: kube.URL, BearerToken: "service-token"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Audience: audience, Config: api.config(), ReviewForeign: true})
	if err != nil {
		t.Fatal(err)
	}
	served := false
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = true
		_, _ = get(r.Context(), t, acting)
	})))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/hello", nil)
	req.Header.Set("Authorization", "Bearer webhook-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || served {
		t.Errorf("a token reviewed with no user name: %d, served %v; want 401, not served", resp.StatusCode, served)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if _, err := get(withUser(ctx, User{Groups: []string{"devs"}}), t, acting); !errors.Is(err, ErrNoCaller) {
		t.Errorf("a caller with no name: %v, want ErrNoCaller", err)
	}
	if n := len(seen.requests()); n != 0 {
		t.Errorf("%d requests reached the API server: %v", n, seen.requests())
	}
}

// Only a caller who is a ServiceAccount or a node as the API server makes
// them (the name and the groups) is sent by name alone: a name alone may be
// anyone's, and the API server would give it groups it does not have and
// drop the extras that restrict it.
func TestActAsCallerSendsByNameAloneOnlyRealServiceAccountsAndNodes(t *testing.T) {
	seen, acting, ctx := actingOnRecorder(t)
	for _, u := range []User{
		{Name: "system:serviceaccount:kube-system:x", Groups: []string{"devs", "system:authenticated"}},
		{Name: "system:serviceaccount:kube-system:x", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default"}},
		{Name: "system:node:Not_A_Node", Groups: []string{"system:nodes"}, Extra: map[string][]string{"example.com/scopes": {"read-only"}}},
		{Name: "system:node:worker-1", Groups: []string{"devs"}, Extra: map[string][]string{"example.com/scopes": {"read-only"}}},
		// A ServiceAccount whose token's authenticator added an extra of
		// its own, which may restrict it: sent whole (constrained
		// impersonation refuses it: closed, not wider).
		{Name: "system:serviceaccount:default:x", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default"},
			Extra: map[string][]string{"example.com/scopes": {"read-only"}, "authentication.kubernetes.io/pod-name": {"x-0"}}},
	} {
		before := len(seen.requests())
		if _, err := get(withUser(ctx, u), t, acting); err != nil {
			t.Fatal(err)
		}
		h := seen.requests()[before]
		want := slices.DeleteFunc(slices.Clone(u.Groups), func(g string) bool { return g == "system:authenticated" })
		if got := h.Values("Impersonate-Group"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s in %v: groups sent %v, want %v", u.Name, u.Groups, got, want)
		}
		if u.Extra != nil && h.Get("Impersonate-Extra-Example.com%2fscopes") != "read-only" {
			t.Errorf("%s: its restricting extra was dropped: %v", u.Name, h)
		}
	}
}

// client-go follows redirects: one to another host is refused, so the
// caller's identity goes to the API server alone. One on the same host is
// followed, as the same caller.
func TestActAsCallerFollowsNoRedirectToAnotherHost(t *testing.T) {
	other := &impersonationSeen{}
	elsewhere := httptest.NewServer(other)
	defer elsewhere.Close()
	seen := &impersonationSeen{}
	kube := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/namespaces/a/configmaps":
			http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
		case "/api/v1/namespaces/b/configmaps":
			http.Redirect(w, r, "/api/v1/namespaces/c/configmaps", http.StatusTemporaryRedirect)
		case "/api/v1/namespaces/d/configmaps":
			http.Redirect(w, r, "https://"+r.Host+"/api/v1/namespaces/c/configmaps", http.StatusTemporaryRedirect)
		default:
			seen.ServeHTTP(w, r)
		}
	}))
	defer kube.Close()
	acting, err := ActAsCaller(&rest.Config{Host: kube.URL})
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(acting)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	alice := withUser(ctx, User{Name: "alice", UID: "42", Groups: []string{"devs"},
		Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"X509SHA256=ab"}}})
	req, _ := http.NewRequestWithContext(alice, http.MethodGet, kube.URL+"/api/v1/namespaces/a/configmaps", nil)
	if _, err := client.Do(req); err == nil || !strings.Contains(err.Error(), "redirected") {
		t.Errorf("a redirect to another host: %v, want a refusal", err)
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("another host received %d requests: %v", n, other.requests())
	}
	// The same host and port by another scheme is another server.
	req, _ = http.NewRequestWithContext(alice, http.MethodGet, kube.URL+"/api/v1/namespaces/d/configmaps", nil)
	if _, err := client.Do(req); err == nil || !strings.Contains(err.Error(), "redirected") {
		t.Errorf("a redirect to https on the same host: %v, want a refusal", err)
	}
	req, _ = http.NewRequestWithContext(alice, http.MethodGet, kube.URL+"/api/v1/namespaces/b/configmaps", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("a redirect on the same host: %v", err)
	}
	resp.Body.Close()
	if reqs := seen.requests(); len(reqs) != 1 || reqs[0].Get("Impersonate-User") != "alice" {
		t.Errorf("the redirected request on the same host: %v, want it as alice", reqs)
	}
}

// An extra key with capitals cannot be carried as it is (the API server
// lowercases an Impersonate-Extra- header's name before unescaping it):
// such a caller is refused, never acted as with another key.
func TestActAsCallerRefusesAnExtraKeyWithCapitals(t *testing.T) {
	seen, acting, ctx := actingOnRecorder(t)
	u := User{Name: "alice", Extra: map[string][]string{"example.com/Scopes": {"read-only"}}}
	if _, err := get(withUser(ctx, u), t, acting); err == nil || !strings.Contains(err.Error(), "capitals") {
		t.Errorf("an extra key with capitals: %v, want a refusal", err)
	}
	if n := len(seen.requests()); n != 0 {
		t.Errorf("%d requests reached the server: %v", n, seen.requests())
	}
}
