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
	seen := &impersonationSeen{}
	srv := httptest.NewServer(seen)
	defer srv.Close()
	acting, err := ActAsCaller(&rest.Config{Host: srv.URL, BearerToken: "service-token"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()

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

	if _, err := get(ctx, t, acting); !errors.Is(err, ErrNoCaller) {
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
