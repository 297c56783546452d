package fleet

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// A SecretsWatcher is what a manager's Add takes, and says whether it
// needs leader election; the package does not import controller-runtime to
// be so.
var (
	_ manager.Runnable               = (*SecretsWatcher)(nil)
	_ manager.LeaderElectionRunnable = (*SecretsWatcher)(nil)
)

func TestSecretsWatcherRunsOnTheLeaderUnlessEveryReplica(t *testing.T) {
	f := New(Options{})
	defer f.Close()
	if !f.SecretsWatcher(SecretsOptions{}).NeedLeaderElection() {
		t.Error("NeedLeaderElection() = false by default, want true: the controllers OnAdd starts write")
	}
	if f.SecretsWatcher(SecretsOptions{EveryReplica: true}).NeedLeaderElection() {
		t.Error("NeedLeaderElection() = true with EveryReplica")
	}
}

// Start is WatchSecrets: clusters join as their Secrets come, and Start
// returns nil when its context ends; wrong options fail Start at once.
func TestSecretsWatcherStartWatches(t *testing.T) {
	ctx := ctxFor(t)
	joined := make(chan string, 1)
	f := New(Options{OnAdd: func(_ context.Context, m *Member) { joined <- m.Name() }})
	defer f.Close()
	client := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "wl1-kubeconfig", Labels: capiLabels("wl1")},
		Data:       map[string][]byte{"value": []byte("not used")},
	})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- f.SecretsWatcher(SecretsOptions{Client: client}).Start(wctx) }()
	select {
	case name := <-joined:
		if name != "capi/wl1" {
			t.Errorf("OnAdd got %q, want capi/wl1", name)
		}
	case <-ctx.Done():
		t.Error("no cluster joined")
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Start = %v when its context ended, want nil", err)
	}
	if err := f.SecretsWatcher(SecretsOptions{}).Start(ctx); err == nil {
		t.Error("Start without a Config or a Client succeeded")
	}
}

// With a Config, WatchSecrets builds its client from it: its requests go
// to the Config's server with the Config's credential.
func TestWatchSecretsFromConfig(t *testing.T) {
	ctx := ctxFor(t)
	hub := newHubServer(t, &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "wl1-kubeconfig", Labels: capiLabels("wl1"), ResourceVersion: "3"},
		Data:       map[string][]byte{"value": []byte("not used")},
	})
	joined := make(chan string, 1)
	f := New(Options{OnAdd: func(_ context.Context, m *Member) { joined <- m.Name() }})
	defer f.Close()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	cfg := &rest.Config{Host: hub.srv.URL, BearerToken: "hub-token"}
	go func() { done <- f.WatchSecrets(wctx, SecretsOptions{Config: cfg, Namespace: "capi"}) }()
	select {
	case name := <-joined:
		if name != "capi/wl1" {
			t.Errorf("OnAdd got %q, want capi/wl1", name)
		}
	case <-ctx.Done():
		t.Errorf("no cluster joined; the hub saw %q", hub.seen())
	}
	stop()
	if err := <-done; err != nil {
		t.Error(err)
	}
	for _, r := range hub.seen() {
		if !strings.HasSuffix(r, "Bearer hub-token") {
			t.Errorf("a request without the Config's token: %s", r)
		}
	}

	if err := f.WatchSecrets(ctx, SecretsOptions{Config: cfg, Client: fake.NewClientset()}); err == nil {
		t.Error("WatchSecrets took a Config and a Client: one of them would be ignored")
	}
}

// hubServer is a plain-HTTP hub API server that serves a fixed set of
// Secrets to a list or a watch (with its initial events, as client-go's
// watch-list asks), and records who asked.
type hubServer struct {
	srv *httptest.Server

	mu       sync.Mutex // guards requests
	requests []string   // "GET path?query Authorization"
}

func newHubServer(t *testing.T, secrets ...*corev1.Secret) *hubServer {
	t.Helper()
	h := &hubServer{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.requests = append(h.requests, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		q := r.URL.Query()
		if q.Get("watch") != "true" {
			list := corev1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "3"}}
			for _, s := range secrets {
				list.Items = append(list.Items, *s)
			}
			_ = json.NewEncoder(w).Encode(list)
			return
		}
		enc := json.NewEncoder(w)
		if q.Get("sendInitialEvents") == "true" {
			for _, s := range secrets {
				_ = enc.Encode(map[string]any{"type": "ADDED", "object": s})
			}
			_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": &corev1.Secret{
				TypeMeta:   metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: "3", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}},
			}})
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done() // nothing changes
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// seen lists the requests the hub has answered or is answering.
func (h *hubServer) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.requests...)
}

var (
	_ manager.Runnable               = (*ProfilesWatcher)(nil)
	_ manager.LeaderElectionRunnable = (*ProfilesWatcher)(nil)
)

// A ProfilesWatcher runs on the leader unless EveryReplica; its Start is
// WatchClusterProfiles: a profile there at the start joins, Start returns
// nil when its context ends, and wrong options fail it at once.
func TestProfilesWatcher(t *testing.T) {
	f := New(Options{})
	defer f.Close()
	if !f.ProfilesWatcher(ProfilesOptions{}).NeedLeaderElection() || f.ProfilesWatcher(ProfilesOptions{EveryReplica: true}).NeedLeaderElection() {
		t.Error("NeedLeaderElection() is not true by default and false with EveryReplica")
	}

	ctx := ctxFor(t)
	joined := make(chan string, 1)
	g := New(Options{OnAdd: func(_ context.Context, m *Member) { joined <- m.Name() }})
	defer g.Close()
	s := newSpoke(t)
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{profilesV1alpha1: "ClusterProfileList"}, profile("inv", "wl1", "test", s.cluster()))
	p := newTestProvider(t, "test")
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		done <- g.ProfilesWatcher(ProfilesOptions{Client: client, Providers: []AccessProvider{p.AccessProvider}}).Start(wctx)
	}()
	select {
	case name := <-joined:
		if name != "inv/wl1" {
			t.Errorf("OnAdd got %q, want inv/wl1", name)
		}
	case <-ctx.Done():
		t.Error("no cluster joined")
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v after its context ended, want nil", err)
	}
	if err := g.ProfilesWatcher(ProfilesOptions{Client: client}).Start(ctx); err == nil {
		t.Error("Start without providers: no error")
	}
}
