package side

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/authvault/authvault/hack/soak/wire"
	"github.com/authvault/authvault/testkit/manifests"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testwait"
)

// hub is the tests' API server, started by the first test that needs it
// and stopped by TestMain.
var (
	hub     *testHub
	hubOnce sync.Once
	hubErr  error
)

type testHub struct {
	cluster *testcluster.Cluster
	admin   kubernetes.Interface
	dyn     dynamic.Interface
}

// startHub is the tests' API server, with the ClusterProfile CRD.
func startHub(t *testing.T) *testHub {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: export KUBEBUILDER_ASSETS=$(bash hack/envtest.sh)")
	}
	hubOnce.Do(func() {
		c, err := testcluster.Start()
		if err != nil {
			hubErr = err
			return
		}
		h := &testHub{cluster: c}
		hub = h
		if h.admin, hubErr = kubernetes.NewForConfig(c.Admin); hubErr != nil {
			return
		}
		if h.dyn, hubErr = dynamic.NewForConfig(c.Admin); hubErr != nil {
			return
		}
		hubErr = h.installCRD()
	})
	if hubErr != nil {
		t.Fatal(hubErr)
	}
	return hub
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (h *testHub) installCRD() error {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(manifests.ClusterProfileCRD), &crd.Object); err != nil {
		return err
	}
	if _, err := h.dyn.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
		return err
	}
	for {
		_, err := h.dyn.Resource(profilesGVR).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the ClusterProfile CRD is not served: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tokenTTL is the life of the hub's tokens: the plugin's and the token
// file's.
const tokenTTL = 20 * time.Second

// pluginMargin is how long before its token dies the plugin says it
// expires.
const pluginMargin = 2 * time.Second

// testSide is what one side of a test gets: its Config, the tokens issued
// for it, and the faults the test can cause.
type testSide struct {
	cfg wire.Config
	hub *testHub

	mu           sync.Mutex // guards tokens, pluginTokens
	tokens       []string   // every token issued for the side, to look for in its output
	pluginTokens []string   // those the token endpoint gave its plugin

	failing  atomic.Bool // the token endpoint answers 503 and issues nothing
	pluginOK atomic.Int64
	// pluginTTL is the life of the plugin's tokens: tokenTTL unless a
	// test sets it before the side starts.
	pluginTTL atomic.Int64
}

// newSide makes what side role needs on the hub: its namespace with a Pod
// no node runs, a CA file, a token file kept fresh, a token endpoint, two
// kubeconfig Secrets and a ClusterProfile (three fleet clusters, all the
// hub itself), and a provider file.
func (h *testHub) newSide(t *testing.T, role string) *testSide {
	t.Helper()
	ctx := testwait.Context(t)
	dir := t.TempDir()
	s := &testSide{hub: h}
	s.pluginTTL.Store(int64(tokenTTL))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns := h.namespace(t, "soak-"+role)
	if _, err := h.admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "idle"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if s.failing.Load() {
			http.Error(w, "not issuing", http.StatusServiceUnavailable)
			return
		}
		s.pluginOK.Add(1)
		ttl := time.Duration(s.pluginTTL.Load())
		issued := time.Now()
		tok := s.issue(ttl)
		s.mu.Lock()
		s.pluginTokens = append(s.pluginTokens, tok)
		s.mu.Unlock()
		// The plugin says the token expires pluginMargin before it does,
		// as real plugins do (aws eks get-token says 14 minutes of a
		// 15-minute token): client-go uses a token until the instant the
		// plugin names, and its exec loop, ticking every execEvery from
		// the first login, met a token said to last until the very
		// instant it died with a stream in flight (a 401 one run in four).
		_ = json.NewEncoder(w).Encode(map[string]string{
			"token":   tok,
			"expires": issued.Add(ttl - pluginMargin).UTC().Format(time.RFC3339),
		})
	}))
	t.Cleanup(endpoint.Close)

	s.cfg = wire.Config{
		Side:              role,
		Server:            h.cluster.Server,
		CAFile:            filepath.Join(dir, "ca.crt"),
		TokenFile:         filepath.Join(dir, "token"),
		PluginCommand:     exe,
		PluginEnv:         map[string]string{wire.RoleEnv: wire.RolePlugin, wire.PluginURLEnv: endpoint.URL},
		Namespace:         ns,
		Pod:               "idle",
		SecretsNamespace:  h.namespace(t, "soak-secrets"),
		ProfilesNamespace: h.namespace(t, "soak-profiles"),
		ProviderFile:      filepath.Join(dir, "providers.json"),
		AddonAudience:     "addon." + ns + ".svc",
		Workers:           2,
		SampleEvery:       2 * time.Second,
		LogFile:           filepath.Join(dir, "side.log"),
	}
	writeFile(t, s.cfg.CAFile, string(h.cluster.CAData))
	writeFile(t, s.cfg.TokenFile, s.issue(tokenTTL))
	writeFile(t, s.cfg.ProviderFile, mustJSON(map[string]any{"providers": []any{map[string]any{
		"name": "soak",
		"execConfig": map[string]any{
			"apiVersion": execAPIVersion, "command": exe,
			"env": []any{map[string]string{"name": wire.RoleEnv, "value": wire.RolePlugin}},
		},
		"profileSourcedEnvVarsPolicy": "AppendIfNotExists",
	}}}))
	for _, name := range []string{"wl0", "wl1"} {
		h.putKubeconfigSecret(t, s.cfg.SecretsNamespace, name, s.issue(0))
	}
	h.putProfile(t, s.cfg.ProfilesNamespace, "p0", endpoint.URL)
	return s
}

// issue is a token of the hub's issuer that expires after ttl (0: never),
// remembered as the side's.
func (s *testSide) issue(ttl time.Duration) string {
	tok := s.hub.cluster.Issuer.Issue(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = append(s.tokens, tok)
	return tok
}

// issued is every token issued for the side so far.
func (s *testSide) issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tokens...)
}

// refreshTokenFile writes a new token to the token file every half of its
// life, until ctx ends.
func (s *testSide) refreshTokenFile(t *testing.T, ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(tokenTTL / 2):
		}
		tmp := s.cfg.TokenFile + ".new"
		if err := os.WriteFile(tmp, []byte(s.issue(tokenTTL)), 0o600); err != nil {
			t.Error(err)
			return
		}
		if err := os.Rename(tmp, s.cfg.TokenFile); err != nil {
			t.Error(err)
			return
		}
	}
}

// revokePlugin stops the token endpoint issuing, and revokes every token
// it gave: the hub's plugin and the profile's fail from then on; the token
// file and the Secrets still serve.
func (s *testSide) revokePlugin() {
	s.failing.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tok := range s.pluginTokens {
		s.hub.cluster.Issuer.Revoke(tok)
	}
}

func (h *testHub) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := h.admin.CoreV1().Namespaces().Create(testwait.Context(t), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// putKubeconfigSecret writes Cluster API's kubeconfig Secret of cluster
// (the hub itself) with tok.
func (h *testHub) putKubeconfigSecret(t *testing.T, ns, cluster, tok string) {
	t.Helper()
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: %q}}]
`, h.cluster.Server, base64.StdEncoding.EncodeToString(h.cluster.CAData), tok)
	_, err := h.admin.CoreV1().Secrets(ns).Create(testwait.Context(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-kubeconfig", Labels: map[string]string{clusterNameLabel: cluster}},
		Data:       map[string][]byte{kubeconfigKey: []byte(kubeconfig)},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// putProfile writes the ClusterProfile ns/name of the hub itself, offering
// the provider "soak" with the token endpoint url in its plugin's
// environment.
func (h *testHub) putProfile(t *testing.T, ns, name, url string) {
	t.Helper()
	ctx := testwait.Context(t)
	client := h.dyn.Resource(profilesGVR).Namespace(ns)
	created, err := client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha1",
		"kind":       "ClusterProfile",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"clusterManager": map[string]any{"name": "soak"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Object["status"] = map[string]any{"accessProviders": []any{map[string]any{
		"name": "soak",
		"cluster": map[string]any{
			"server":                     h.cluster.Server,
			"certificate-authority-data": base64.StdEncoding.EncodeToString(h.cluster.CAData),
			"extensions": []any{map[string]any{
				"name": extraEnvExtension, "extension": map[string]any{wire.PluginURLEnv: url},
			}},
		},
	}}}
	if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
