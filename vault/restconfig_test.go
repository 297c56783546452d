package vault

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

// A clientset and a controller-runtime client built from RESTConfig send
// every request through the vault, and keep the user's own settings.
func TestRESTConfigServesClientGoAndControllerRuntime(t *testing.T) {
	v, srv, iss := issuingVault(t, Options{}, "/k8s/clusters/c-1")
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tls := cfg.TLSClientConfig; cfg.Host != srv.URL() || len(tls.CAData)+len(tls.CertData)+len(tls.KeyData) > 0 || tls.Insecure || cfg.BearerToken != "" || cfg.Username != "" {
		t.Fatalf("RESTConfig() = %+v, want the server as Host and no TLS or auth of its own", cfg)
	}
	cfg.UserAgent = "my-operator/1.0"
	cfg.Impersonate.UserName = "bob"
	if _, err := rest.HTTPClientFor(cfg); err != nil {
		t.Fatalf("rest.HTTPClientFor() error: %v", err)
	}

	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	srv.revoke(iss.latest()) // the first request meets a 401 and is retried
	list, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("clientset List() error: %v", err)
	}
	if len(list.Items) != 1 || !strings.HasPrefix(list.Items[0].Name, "seen-by-token-tok-2") {
		t.Errorf("clientset List() = %+v, want the list as the second token saw it", list.Items)
	}

	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme, Mapper: mapper})
	if err != nil {
		t.Fatalf("client.New() error: %v", err)
	}
	var cms corev1.ConfigMapList
	if err := c.List(context.Background(), &cms, client.InNamespace("default")); err != nil {
		t.Fatalf("controller-runtime List() error: %v", err)
	}

	for _, r := range srv.seen() {
		if r.Path != "/api/v1/namespaces/default/configmaps" {
			t.Errorf("server saw path %s, want it below its prefix", r.Path)
		}
		if !strings.HasPrefix(r.UserAgent, "my-operator/1.0") || r.Impersonate != "bob" {
			t.Errorf("server saw user agent %q and impersonation %q, want the config's", r.UserAgent, r.Impersonate)
		}
	}
	if len(srv.seen()) != 3 {
		t.Errorf("server saw %d requests, want 3 (a 401, the retry, controller-runtime's)", len(srv.seen()))
	}
}

func TestNamespace(t *testing.T) {
	v, _ := testVault(t, Options{})
	if got := v.Namespace(); got != "default" {
		t.Errorf("Namespace() of an empty vault = %q, want default", got)
	}
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: "https://a", Token: "t", DefaultNamespace: "team-a", Priority: 1}))
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: "https://b", Token: "u", DefaultNamespace: "team-b"}))
	mustSelect(t, v)
	eventually(t, "both", func() bool { return v.snap.Load().size() == 2 })
	if got := v.Namespace(); got != "team-a" {
		t.Errorf("Namespace() = %q, want the highest priority's team-a", got)
	}
}

// A first login that gives no credential (within MaxWait) does not fail
// RESTConfig: the config names PendingServer, its requests get the vault's LoginError while
// the handler fails, and reach the credential's server once it heals,
// under the server's path prefix. Only a context that ends first, a closed
// vault and one with no handler at all fail RESTConfig.
func TestRESTConfigAfterAFailedFirstLogin(t *testing.T) {
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, "/k8s/clusters/c-1")
	srv.allow("late")
	var healed atomic.Bool
	// A handler that retries without end holds the first Select for
	// MaxWait: then RESTConfig returns, and the login goes on.
	v := New(Options{MaxWait: 200 * time.Millisecond, ReadyGrace: -1})
	t.Cleanup(v.Close)
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		if !healed.Load() {
			return nil, errors.New("secret store unreachable")
		}
		return &login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "late"}, nil
	}, login.ID("store"), login.Backoff(10*time.Millisecond, 50*time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		t.Fatalf("RESTConfig() after a failed first login: %v, want a config", err)
	}
	if cfg.Host != PendingServer {
		t.Fatalf("RESTConfig().Host = %q, want PendingServer", cfg.Host)
	}
	if err := v.Ready(nil); err == nil || !strings.Contains(err.Error(), "secret store unreachable") {
		t.Errorf("Ready() = %v, want the failure", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	var le *LoginError
	if !errors.As(err, &le) {
		t.Fatalf("List() before a credential = %v, want the vault's LoginError", err)
	}

	healed.Store(true)
	testwait.For(t, "a List() served once the handler healed", func() bool {
		_, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		return err == nil
	})
	// The server serves nothing outside its prefix, which it strips.
	if seen := srv.seen(); len(seen) == 0 || seen[len(seen)-1].Path != "/api/v1/namespaces/default/configmaps" || seen[len(seen)-1].Status != 200 {
		t.Errorf("the server saw %+v, want the list under its prefix", seen)
	}

	// A request that brings its own Authorization goes to the same
	// server, with that Authorization alone.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, PendingServer+"/api/v1/namespaces/default/pods", nil)
	req.Header.Set("Authorization", "Bearer my-own")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("a request of its own Authorization on PendingServer: %v", err)
	}
	resp.Body.Close()
	if seen := srv.seen(); seen[len(seen)-1].Path != "/api/v1/namespaces/default/pods" || seen[len(seen)-1].Auth != "Bearer my-own" {
		t.Errorf("the server saw %+v, want the caller's own Authorization alone", seen[len(seen)-1])
	}

	none := New(Options{NoFallback: true})
	defer none.Close()
	if _, err := none.RESTConfig(ctx); !errors.Is(err, ErrNoHandlers) {
		t.Errorf("RESTConfig() of a vault with no handler at all = %v, want ErrNoHandlers: no login is coming", err)
	}

	// A login that is still running when the caller's context ends: the
	// caller gets its context's error, not a config of PendingServer.
	slow := New(Options{NoFallback: true})
	slow.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	done, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	if cfg, err := slow.RESTConfig(done); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RESTConfig() with a context that ends during the login = %v, %v; want context.DeadlineExceeded", cfg, err)
	}
	slow.Close()
	if _, err := slow.RESTConfig(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("RESTConfig() on a closed vault = %v, want ErrClosed", err)
	}
}
