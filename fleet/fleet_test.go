package fleet

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// ctxFor is a context for calls that are to succeed: it ends after a
// hang's worth of time (testwait.Hang), or with the test.
func ctxFor(t *testing.T) context.Context {
	return testwait.Context(t)
}

// version asks the cluster's /version through cfg.
func version(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	return err
}

// eventually polls cond until it holds, for a hang's worth of time at
// most (testwait.Hang).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, cond)
}

// A cluster's config is one object through every rotation; a refresh puts
// the new token under it before the old one is rejected; no request fails.
func TestRESTConfigIsStableAcrossRotations(t *testing.T) {
	ctx := ctxFor(t)
	f := New(Options{})
	defer f.Close()
	api := newAPIServer(t)
	if err := f.Add("a", api.login, login.Backoff(10*time.Millisecond, time.Second)); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.RESTConfig(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := cs.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx); err != nil {
			t.Fatalf("rotation %d: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond) // the login floor
		api.rotate()
		f.Vault("a").Refresh()
		eventually(t, "the refreshed credential", func() bool {
			c, err := f.Vault("a").Select(ctx)
			return err == nil && c.Info.Token == *api.token.Load()
		})
		again, err := f.RESTConfig(ctx, "a")
		if err != nil || again != cfg {
			t.Fatalf("RESTConfig after rotation %d = %p, %v; want the same object %p", i, again, err, cfg)
		}
	}
}

func TestAddRemoveAndLookups(t *testing.T) {
	ctx := ctxFor(t)
	var mu sync.Mutex // guards added and removed: Close calls OnRemove concurrently
	var added, removed []string
	f := New(Options{
		OnAdd:    func(_ context.Context, m *Member) { mu.Lock(); added = append(added, m.Name()); mu.Unlock() },
		OnRemove: func(m *Member) { mu.Lock(); removed = append(removed, m.Name()); mu.Unlock() },
	})
	defer f.Close()
	a, b := newAPIServer(t), newAPIServer(t)
	if err := f.Add("a", a.login); err != nil {
		t.Fatal(err)
	}
	if err := f.Add("b", b.login, login.ID("b-handler")); err != nil {
		t.Fatal(err)
	}
	if err := f.Add("a", b.login); !errors.Is(err, ErrExists) {
		t.Errorf("Add of a taken name = %v, want ErrExists", err)
	}
	if err := f.Add("", a.login); err == nil {
		t.Error("Add without a name succeeded")
	}
	if _, err := f.RESTConfig(ctx, "c"); !errors.Is(err, ErrUnknownCluster) || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("RESTConfig of an unknown cluster = %v, want ErrUnknownCluster naming it", err)
	}
	if f.Vault("c") != nil {
		t.Error("Vault of an unknown cluster is not nil")
	}
	if got := strings.Join(f.Names(), ","); got != "a,b" {
		t.Errorf("Names() = %s", got)
	}
	// Each cluster gets its own credentials.
	for name, api := range map[string]*apiServer{"a": a, "b": b} {
		c, err := f.Vault(name).Select(ctx)
		if err != nil || c.Info.Server != api.srv.URL {
			t.Errorf("cluster %s: %v, %v", name, c, err)
		}
	}

	if !f.Remove("a") || f.Remove("a") {
		t.Error("Remove is true once, then false")
	}
	if err := f.Add("a", a.login); err != nil {
		t.Errorf("Add after Remove: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := strings.Join(added, ","), "a,b,a"; got != want {
		t.Errorf("OnAdd saw %s, want %s", got, want)
	}
	if got, want := strings.Join(removed, ","), "a"; got != want {
		t.Errorf("OnRemove saw %s, want %s", got, want)
	}
}

// Remove closes the cluster's vault: requests through its config fail
// with vault.ErrClosed, and its connections close.
func TestRemoveClosesTheVaultAndItsConnections(t *testing.T) {
	ctx := ctxFor(t)
	f := New(Options{})
	defer f.Close()
	a, b := newAPIServer(t), newAPIServer(t)
	for name, api := range map[string]*apiServer{"a": a, "b": b} {
		if err := f.Add(name, api.login); err != nil {
			t.Fatal(err)
		}
	}
	cfgA, err := f.RESTConfig(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	cfgB, err := f.RESTConfig(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := version(ctx, cfgA); err != nil {
		t.Fatal(err)
	}
	if err := version(ctx, cfgB); err != nil {
		t.Fatal(err)
	}
	if a.open.Load() == 0 {
		t.Fatal("no connection to a")
	}
	f.Remove("a")
	eventually(t, "a's connections to close", func() bool { return a.open.Load() == 0 })
	if err := version(ctx, cfgA); !errors.Is(err, vault.ErrClosed) {
		t.Errorf("request through a removed cluster's config = %v, want vault.ErrClosed", err)
	}
	if err := version(ctx, cfgB); err != nil {
		t.Errorf("the other cluster: %v", err)
	}
	if b.open.Load() == 0 {
		t.Error("b's connections closed too")
	}
}

// A remote cluster never falls back to this process's own kubeconfig or
// ServiceAccount: a fleet vault whose handler gives nothing has nothing.
func TestNoFallback(t *testing.T) {
	ctx := ctxFor(t)
	fallback := &atomic.Int64{}
	f := New(Options{Vault: vault.Options{Fallback: []login.Registration{{Handler: func(context.Context) (*login.ConnectionInfo, error) {
		fallback.Add(1)
		return &login.ConnectionInfo{Server: "https://own.example", Token: "own-token"}, nil
	}}}}})
	defer f.Close()
	if err := f.Add("a", func(context.Context) (*login.ConnectionInfo, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Vault("a").Select(ctx); err == nil {
		t.Error("Select succeeded without a credential")
	}
	if fallback.Load() != 0 {
		t.Error("the fallback handler ran")
	}
}

// Every cluster's metrics carry its name; a removed cluster's are gone and
// it can come back.
func TestMetricsAndLogsNameTheCluster(t *testing.T) {
	ctx := ctxFor(t)
	reg := prometheus.NewPedanticRegistry()
	var logs testlog.Buffer
	f := New(Options{Registerer: reg, Logger: logs.Logger(1)})
	defer f.Close()
	a, b := newAPIServer(t), newAPIServer(t)
	for name, api := range map[string]*apiServer{"prod-eu": a, "prod-us": b} {
		if err := f.Add(name, api.login); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Vault(name).Select(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clusters := func() map[string]bool {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, mf := range families {
			if mf.GetName() != "authvault_credentials" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "cluster" {
						seen[l.GetValue()] = true
					}
				}
			}
		}
		return seen
	}
	if got := clusters(); !got["prod-eu"] || !got["prod-us"] {
		t.Errorf("authvault_credentials has clusters %v, want both", got)
	}
	f.Remove("prod-eu")
	if got := clusters(); got["prod-eu"] || !got["prod-us"] {
		t.Errorf("after Remove, clusters %v, want prod-us only", got)
	}
	if err := f.Add("prod-eu", a.login); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Vault("prod-eu").Select(ctx); err != nil {
		t.Fatal(err)
	}
	if got := clusters(); !got["prod-eu"] {
		t.Errorf("a cluster added again has no metrics: %v", got)
	}
	for _, name := range []string{`"cluster"="prod-eu"`, `"cluster"="prod-us"`} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("no log line carries %s", name)
		}
	}
	if strings.Contains(logs.String(), *a.token.Load()) {
		t.Error("a token reached the log")
	}
}

func TestClose(t *testing.T) {
	ctx := ctxFor(t)
	var removed atomic.Int64
	f := New(Options{OnRemove: func(*Member) { removed.Add(1) }})
	a := newAPIServer(t)
	for _, name := range []string{"a", "b", "c"} {
		if err := f.Add(name, a.login); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := f.RESTConfig(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := version(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f.Close()
	if removed.Load() != 3 {
		t.Errorf("OnRemove called %d times, want 3", removed.Load())
	}
	if err := f.Add("d", a.login); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close = %v, want ErrClosed", err)
	}
	if _, err := f.RESTConfig(ctx, "a"); !errors.Is(err, ErrClosed) {
		t.Errorf("RESTConfig after Close = %v, want ErrClosed", err)
	}
	eventually(t, "the connections to close", func() bool { return a.open.Load() == 0 })
}

// Callers of RESTConfig on a cluster whose login fails get the login's
// error, naming the cluster, within their deadline.
func TestRESTConfigWithoutCredential(t *testing.T) {
	f := New(Options{})
	defer f.Close()
	if err := f.Add("broken", func(context.Context) (*login.ConnectionInfo, error) {
		return nil, login.Permanent(errors.New("the Secret has no such key"))
	}); err != nil {
		t.Fatal(err)
	}
	// The login fails for good at its first attempt: the error comes at
	// once, and the deadline is only a hang's.
	_, err := f.RESTConfig(ctxFor(t), "broken")
	var le *vault.LoginError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), `cluster "broken"`) || !strings.Contains(err.Error(), "no such key") {
		t.Errorf("RESTConfig = %v, want a LoginError naming the cluster and the cause", err)
	}
}

// A cluster of a name that was just removed, added while the old one's
// vault is still closing (WatchSecrets closes in the background; Remove
// frees the name before it closes), has its metrics: the old vault's
// neither blocks their registration nor, unregistered late, takes them
// away.
func TestMetricsOfAClusterAddedWhileItsNamesakeCloses(t *testing.T) {
	ctx := ctxFor(t)
	reg := prometheus.NewPedanticRegistry()
	a := newAPIServer(t)
	var f *Fleet
	var once sync.Once
	f = New(Options{Registerer: reg, OnRemove: func(m *Member) {
		once.Do(func() {
			if err := f.Add(m.Name(), a.login); err != nil { // before the old vault closes
				t.Error(err)
			}
		})
	}})
	defer f.Close()
	if err := f.Add("a", a.login); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Vault("a").Select(ctx); err != nil {
		t.Fatal(err)
	}
	f.Remove("a")
	if _, err := f.Vault("a").Select(ctx); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range families {
		found = found || mf.GetName() == "authvault_credentials"
	}
	if !found {
		t.Errorf("the new cluster \"a\" has no authvault_credentials; families: %d", len(families))
	}
}
