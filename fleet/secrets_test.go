package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/fakewatch"
	"github.com/authvault/authvault/testkit/testlog"
)

// hub is a fake hub cluster's Secrets with a WatchSecrets running on them.
type hub struct {
	t      *testing.T
	client *fake.Clientset
	fleet  *Fleet
	logs   *testlog.Buffer

	mu             sync.Mutex // guards added, removed and ctxs
	added, removed []string
	ctxs           []context.Context // of OnAdd, in the order of added
	barriers       int
}

// newHub starts the watch on a hub that holds objs already, as after a
// restart.
func newHub(t *testing.T, opts SecretsOptions, objs ...runtime.Object) *hub {
	t.Helper()
	return newHubLogging(t, 1, opts, objs...)
}

// newHubLogging is newHub with the fleet's log kept up to verbosity v.
func newHubLogging(t *testing.T, v int, opts SecretsOptions, objs ...runtime.Object) *hub {
	t.Helper()
	h := &hub{t: t, client: fake.NewClientset(objs...), logs: &testlog.Buffer{}}
	h.fleet = New(Options{
		Logger: h.logs.Logger(v),
		OnAdd: func(ctx context.Context, m *Member) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.added, h.ctxs = append(h.added, m.Name()), append(h.ctxs, ctx)
		},
		OnRemove: func(m *Member) { h.mu.Lock(); h.removed = append(h.removed, m.Name()); h.mu.Unlock() },
	})
	opts.Client = h.client
	opts.Login = append([]login.Option{login.Backoff(10*time.Millisecond, time.Second)}, opts.Login...) // no login floor to wait for, unless the test sets one
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	begun := fakewatch.Begun(&h.client.Fake, h.client.Tracker())
	go func() { done <- h.fleet.WatchSecrets(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		h.fleet.Close()
	})
	if err := begun(); err != nil {
		t.Fatal(err)
	}
	return h
}

// events are the clusters OnAdd and OnRemove saw, barriers left out. A
// cluster is in the fleet (Vault) before OnAdd is told, and out of it
// before OnRemove is: call barrier first to read what the watch has done.
func (h *hub) events() (added, removed string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	notBarrier := func(names []string) string {
		var out []string
		for _, n := range names {
			if !strings.HasPrefix(n, "barrier/") {
				out = append(out, n)
			}
		}
		return strings.Join(out, ",")
	}
	return notBarrier(h.added), notBarrier(h.removed)
}

// addedCtx is the context OnAdd got for the nth member called name (from
// 1), once OnAdd has been told of it: the log line that a cluster joined
// comes before OnAdd is called.
func (h *hub) addedCtx(name string, n int) context.Context {
	h.t.Helper()
	return nthCtx(h.t, &h.mu, &h.added, &h.ctxs, name, n)
}

// nthCtx waits until added, guarded by mu, holds name n times, and returns
// the context of ctxs at the nth.
func nthCtx(t *testing.T, mu *sync.Mutex, added *[]string, ctxs *[]context.Context, name string, n int) context.Context {
	t.Helper()
	var ctx context.Context
	eventually(t, fmt.Sprintf("OnAdd to be told of %s %d time(s)", name, n), func() bool {
		mu.Lock()
		defer mu.Unlock()
		seen := 0
		for i, a := range *added {
			if a == name {
				if seen++; seen == n {
					ctx = (*ctxs)[i]
					return true
				}
			}
		}
		return false
	})
	return ctx
}

// barrier returns once the watch has handled every Secret event before it:
// the informer hands events over one at a time, in order, so a Secret
// written now and seen as a new cluster comes after all of them. (The
// barrier's cluster is never used, so it never logs in.)
func (h *hub) barrier() {
	h.t.Helper()
	h.barriers++
	name := fmt.Sprintf("b%d", h.barriers)
	h.put("barrier", name+"-kubeconfig", capiLabels(name), map[string][]byte{"value": []byte("not used")})
	eventually(h.t, "the barrier", func() bool { return h.fleet.Vault("barrier/"+name) != nil })
}

// put creates or updates a Secret.
func (h *hub) put(namespace, name string, labels map[string]string, data map[string][]byte) {
	h.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}, Data: data}
	secrets := h.client.CoreV1().Secrets(namespace)
	if _, err := secrets.Update(context.Background(), s, metav1.UpdateOptions{}); err == nil {
		return
	}
	if _, err := secrets.Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// gets counts the GETs of Secrets: one per login of a cluster.
func (h *hub) gets() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
			n++
		}
	}
	return n
}

func capiLabels(cluster string) map[string]string {
	return map[string]string{ClusterNameLabel: cluster}
}

// A Secret that appears adds its cluster; one whose kubeconfig changes
// refreshes it at once; a resync or a label edit does nothing; one that
// goes removes it and closes its connections.
func TestWatchSecretsLifecycle(t *testing.T) {
	ctx := ctxFor(t)
	h := newHub(t, SecretsOptions{})
	api := newAPIServer(t)
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	eventually(t, "the cluster to be added", func() bool { return h.fleet.Vault("capi/wl1") != nil })
	cfg, err := h.fleet.RESTConfig(ctx, "capi/wl1")
	if err != nil {
		t.Fatal(err)
	}
	if err := version(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	// The kubeconfig changes: the vault takes the new token at once, with
	// no request having to meet the old one's 401 first.
	newToken := api.rotate()
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	eventually(t, "the vault to hold the new token", func() bool {
		c, err := h.fleet.Vault("capi/wl1").Select(ctx)
		return err == nil && c.Info.Token == newToken
	})
	if err := version(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	// Unchanged kubeconfig: a label edit and an annotation-only update.
	h.barrier()
	gets := h.gets()
	h.put("capi", "wl1-kubeconfig", map[string]string{ClusterNameLabel: "wl1", "team": "blue"}, map[string][]byte{"value": api.kubeconfig()})
	h.put("capi", "wl1-kubeconfig", map[string]string{ClusterNameLabel: "wl1", "team": "red"}, map[string][]byte{"value": api.kubeconfig(), "other": []byte("x")})
	h.barrier()
	if got := h.gets(); got != gets {
		t.Errorf("an update that left the kubeconfig alone read the Secret %d more times", got-gets)
	}

	if err := h.client.CoreV1().Secrets("capi").Delete(ctx, "wl1-kubeconfig", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cluster to be removed", func() bool { return h.fleet.Vault("capi/wl1") == nil })
	eventually(t, "its connections to close", func() bool { return api.open.Load() == 0 })
	h.barrier() // the cluster leaves the fleet before OnRemove is told
	if added, removed := h.events(); added != "capi/wl1" || removed != "capi/wl1" {
		t.Errorf("OnAdd saw %q, OnRemove %q; want capi/wl1 once each", added, removed)
	}
}

// Clusters are named namespace/cluster: two namespaces may hold clusters of
// one name. A <cluster>-kubeconfig Secret relabelled to another cluster
// serves neither (its name does not claim the new one); a Secret without
// the label under a custom selector is named after itself.
func TestWatchSecretsNames(t *testing.T) {
	h := newHub(t, SecretsOptions{})
	api := newAPIServer(t)
	kc := map[string][]byte{"value": api.kubeconfig()}
	h.put("team-a", "prod-kubeconfig", capiLabels("prod"), kc)
	h.put("team-b", "prod-kubeconfig", capiLabels("prod"), kc)
	h.put("team-b", "unlabelled", nil, kc)
	eventually(t, "both clusters", func() bool { return len(h.fleet.Names()) == 2 })
	if got := strings.Join(h.fleet.Names(), ","); got != "team-a/prod,team-b/prod" {
		t.Errorf("Names() = %s", got)
	}
	h.put("team-a", "prod-kubeconfig", capiLabels("staging"), kc)
	eventually(t, "the relabelled Secret's cluster to go", func() bool { return h.fleet.Vault("team-a/prod") == nil })
	h.barrier()
	if h.fleet.Vault("team-a/staging") != nil {
		t.Error("prod-kubeconfig, labelled staging, claimed team-a/staging")
	}
	// Losing the label is leaving the selection.
	h.put("team-b", "prod-kubeconfig", nil, kc)
	eventually(t, "the unlabelled Secret's cluster to go", func() bool { return h.fleet.Vault("team-b/prod") == nil })

	custom := newHub(t, SecretsOptions{LabelSelector: "fleet.example/member=true", Key: "kubeconfig"})
	custom.put("hub", "edge-1", map[string]string{"fleet.example/member": "true"}, map[string][]byte{"kubeconfig": api.kubeconfig()})
	eventually(t, "a cluster named after its Secret", func() bool { return custom.fleet.Vault("hub/edge-1") != nil })
	if _, err := custom.fleet.Vault("hub/edge-1").Select(ctxFor(t)); err != nil {
		t.Errorf("custom key: %v", err)
	}
}

// A cluster added by hand is never replaced by a Secret naming it; the
// collision is logged.
func TestWatchSecretsLeavesOthersAlone(t *testing.T) {
	h := newHub(t, SecretsOptions{})
	mine, theirs := newAPIServer(t), newAPIServer(t)
	if err := h.fleet.Add("capi/wl1", mine.login); err != nil {
		t.Fatal(err)
	}
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": theirs.kubeconfig()})
	eventually(t, "the collision to be logged", func() bool { return strings.Contains(h.logs.String(), "not added to the fleet") })
	c, err := h.fleet.Vault("capi/wl1").Select(ctxFor(t))
	if err != nil || c.Info.Server != mine.srv.URL {
		t.Errorf("the hand-added cluster got %v, %v", c, err)
	}
	if err := h.client.CoreV1().Secrets("capi").Delete(context.Background(), "wl1-kubeconfig", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.barrier()
	if h.fleet.Vault("capi/wl1") == nil {
		t.Error("deleting the colliding Secret removed the hand-added cluster")
	}
}

// A kubeconfig Secret that names an exec plugin is refused under the
// default policy: the cluster is there, its logins fail saying why, and the
// command never runs. Nothing of the kubeconfig reaches the log.
func TestWatchSecretsRefusesPlugins(t *testing.T) {
	h := newHub(t, SecretsOptions{})
	marker := filepath.Join(t.TempDir(), "ran")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://wl.example:6443"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, "touch %s"], interactiveMode: Never}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, marker)
	h.put("capi", "evil-kubeconfig", capiLabels("evil"), map[string][]byte{"value": []byte(kubeconfig)})
	eventually(t, "the cluster", func() bool { return h.fleet.Vault("capi/evil") != nil })
	_, err := h.fleet.RESTConfig(ctxFor(t), "capi/evil") // refused at once: the deadline is a hang's
	if err == nil || !strings.Contains(err.Error(), `exec plugin "sh" is not allowed: plugin policy DenyAll`) {
		t.Errorf("RESTConfig = %v, want the plugin refused", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Error("the plugin ran")
	}
	if strings.Contains(h.logs.String(), "touch") {
		t.Error("the kubeconfig's content reached the log")
	}
}

func TestWatchSecretsNeedsAClient(t *testing.T) {
	f := New(Options{})
	defer f.Close()
	if err := f.WatchSecrets(context.Background(), SecretsOptions{}); err == nil {
		t.Error("no error without a client")
	}
	if err := f.WatchSecrets(context.Background(), SecretsOptions{Client: fake.NewClientset(), LabelSelector: "a in (b"}); err == nil {
		t.Error("no error for a bad selector")
	}
	if err := f.WatchSecrets(ctxFor(t), SecretsOptions{Client: fake.NewClientset(), Format: ArgoCD + 1}); err == nil {
		t.Error("no error for an unknown Format: its Secrets would be read as Cluster API's")
	}
}

// Cluster API labels every Secret of a cluster with ClusterNameLabel (its
// CA, etcd, sa and proxy Secrets as well as its kubeconfig): under the
// default selector, a Secret without the kubeconfig's key must not take the
// cluster's name before the kubeconfig Secret comes.
func TestWatchSecretsSkipsSecretsWithoutTheKey(t *testing.T) {
	ctx := ctxFor(t)
	h := newHub(t, SecretsOptions{})
	api := newAPIServer(t)
	h.put("capi", "wl1-ca", capiLabels("wl1"), map[string][]byte{"tls.crt": []byte("x"), "tls.key": []byte("y")})
	h.barrier()
	if h.fleet.Vault("capi/wl1") != nil {
		t.Fatal("a Secret without the kubeconfig's key added the cluster")
	}
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	eventually(t, "the cluster to be added", func() bool { return h.fleet.Vault("capi/wl1") != nil })
	cfg, err := h.fleet.RESTConfig(ctx, "capi/wl1")
	if err != nil {
		t.Fatal(err)
	}
	if err := version(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// A Secret deleted and created again at once: OnRemove of the old cluster
// comes before OnAdd of the new one of the same name, so that whoever keys
// what runs against a cluster by its name (examples/fleet) stops the old
// and keeps the new.
func TestWatchSecretsRemoveBeforeReAdd(t *testing.T) {
	ctx := ctxFor(t)
	var mu sync.Mutex
	var events []string
	f := New(Options{
		OnAdd: func(_ context.Context, m *Member) { mu.Lock(); events = append(events, "add "+m.Name()); mu.Unlock() },
		OnRemove: func(m *Member) {
			time.Sleep(50 * time.Millisecond) // a goroutine scheduled late
			mu.Lock()
			events = append(events, "remove "+m.Name())
			mu.Unlock()
		},
	})
	defer f.Close()
	client := fake.NewClientset()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	// A Secret created between the informer's list and its watch would be
	// lost (the fake keeps no history): under load, the test waited 30 s.
	begun := fakewatch.Begun(&client.Fake, client.Tracker())
	go func() { done <- f.WatchSecrets(wctx, SecretsOptions{Client: client}) }()
	defer func() { cancel(); <-done }()
	if err := begun(); err != nil {
		t.Fatal(err)
	}
	api := newAPIServer(t)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "wl1-kubeconfig", Labels: capiLabels("wl1")},
		Data: map[string][]byte{"value": api.kubeconfig()}}
	secrets := client.CoreV1().Secrets("capi")
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cluster to be added", func() bool { return f.Vault("capi/wl1") != nil })
	if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "three events", func() bool { mu.Lock(); defer mu.Unlock(); return len(events) == 3 })
	mu.Lock()
	got := strings.Join(events, ", ")
	mu.Unlock()
	if want := "add capi/wl1, remove capi/wl1, add capi/wl1"; got != want {
		t.Errorf("events = %q, want %q", got, want)
	}
}

// A Secret rewritten in a storm refreshes its cluster no more than its
// login floor allows: the hub is read about once per floor, not once per
// rewrite.
func TestWatchSecretsRewriteStorm(t *testing.T) {
	ctx := ctxFor(t)
	h := newHub(t, SecretsOptions{Login: []login.Option{login.Backoff(200*time.Millisecond, time.Second)}})
	api := newAPIServer(t)
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	eventually(t, "the cluster to be added", func() bool { return h.fleet.Vault("capi/wl1") != nil })
	if _, err := h.fleet.RESTConfig(ctx, "capi/wl1"); err != nil {
		t.Fatal(err)
	}
	start, gets := time.Now(), h.gets()
	for range 200 {
		api.rotate()
		h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	}
	last := *api.token.Load()
	eventually(t, "the last rewrite's token", func() bool {
		c, err := h.fleet.Vault("capi/wl1").Select(ctx)
		return err == nil && c.Info.Token == last
	})
	took := time.Since(start)
	if got, limit := h.gets()-gets, int(took/(200*time.Millisecond))+2; got > limit {
		t.Errorf("200 rewrites in %v read the Secret %d times, want at most %d", took, got, limit)
	}
}

// The informer's cache keeps no Secret's content: the handler reads the
// Secret at every login, and the watch needs only to know whether the
// kubeconfig changed. Under Cluster API's selector the cache would
// otherwise hold every cluster's admin kubeconfig and CA, etcd and
// service-account keys for the life of the process.
func TestWatchSecretsCacheHoldsNoContent(t *testing.T) {
	w := &secretWatch{format: clusterAPIFormat("value", handlers.DenyAll, nil)}
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "wl1-ca", Labels: capiLabels("wl1")},
		Data: map[string][]byte{"value": []byte("token: s3cret"), "tls.key": []byte("PRIVATE KEY")}}
	out, err := w.slim(in)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	if s.Name != "wl1-ca" || s.Labels[ClusterNameLabel] != "wl1" {
		t.Errorf("slim dropped the metadata: %v", s.ObjectMeta)
	}
	if _, ok := s.Data["tls.key"]; ok || len(s.Data) != 1 || strings.Contains(fmt.Sprint(s.Data), "s3cret") {
		t.Errorf("slim kept content: %q", s.Data)
	}
	other, _ := w.slim(&corev1.Secret{Data: map[string][]byte{"value": []byte("token: other")}})
	if string(other.(*corev1.Secret).Data[digestKey]) == string(s.Data[digestKey]) {
		t.Error("two kubeconfigs slim to the same value")
	}
	if none, _ := w.slim(&corev1.Secret{Data: map[string][]byte{"tls.key": []byte("k")}}); len(none.(*corev1.Secret).Data) != 0 {
		t.Error("a Secret without the key slims to one with it")
	}
}

// A cluster that nothing has used yet does not log in when its Secret
// changes: its first login will read the Secret as it is then. A fleet
// of EKS clusters, whose kubeconfig Secrets Cluster API rewrites every few
// minutes, would otherwise log in to every cluster at every rewrite.
func TestWatchSecretsChangeOfAnUnusedClusterStaysLazy(t *testing.T) {
	h := newHub(t, SecretsOptions{})
	api := newAPIServer(t)
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	eventually(t, "the cluster to be added", func() bool { return h.fleet.Vault("capi/wl1") != nil })
	api.rotate()
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	h.barrier() // the vault's own test (TestRefreshCallOnAnUnusedVaultDoesNothing) proves no login starts
	if got := h.gets(); got != 0 {
		t.Errorf("an unused cluster read its Secret %d times on a change, want 0", got)
	}
}

// A Secret's cluster removed by hand comes back when its Secret changes.
func TestWatchSecretsBringsBackAClusterRemovedByHand(t *testing.T) {
	h := newHub(t, SecretsOptions{})
	api := newAPIServer(t)
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	eventually(t, "the cluster", func() bool { return h.fleet.Vault("capi/wl1") != nil })
	h.fleet.Remove("capi/wl1")
	api.rotate()
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	eventually(t, "the cluster back", func() bool { return h.fleet.Vault("capi/wl1") != nil })
	c, err := h.fleet.Vault("capi/wl1").Select(ctxFor(t))
	if err != nil || c.Info.Token != *api.token.Load() {
		t.Errorf("the cluster came back with %v, %v", c, err)
	}
}

// A watch that the hub refuses (RBAC) says so through the fleet's logger.
func TestWatchSecretsLogsWatchErrors(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("RBAC says no"))
	})
	var logs testlog.Buffer
	f := New(Options{Logger: logs.Logger(0)})
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.WatchSecrets(ctx, SecretsOptions{Client: client}) }()
	eventually(t, "the error in the log", func() bool { return strings.Contains(logs.String(), "watching kubeconfig Secrets failed") })
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	if !strings.Contains(logs.String(), "forbidden") {
		t.Errorf("the log does not say why: %s", logs.String())
	}
}
