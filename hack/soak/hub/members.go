package hub

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/authvault/authvault/testkit/manifests"
)

const (
	secretsNamespace  = "soak-capi"
	profilesNamespace = "soak-inventory"
)

// members are the fleet's clusters: each a name for the same API server,
// reached with a credential of its own. Those from Secrets hold a token
// that their owner (the hub, as Cluster API would) rewrites two thirds into
// its life; those from ClusterProfiles offer the sides' plugin.
type members struct {
	h       *Hub
	secrets []string                 // cluster names
	first   map[string]time.Duration // the life of each one's first token; read-only once started
	failing atomic.Bool              // the last write failed
	wg      sync.WaitGroup

	mu     sync.Mutex // guards tokens, paused
	tokens map[string]string
	paused map[string]bool // deleted for a while: not rewritten
}

func secretName(cluster string) string { return cluster + "-kubeconfig" }

// FleetName is what a fleet calls the cluster of a Secret: its namespace
// and name, as the sides report it.
func FleetName(cluster string) string { return secretsNamespace + "/" + cluster }

func newMembers(ctx context.Context, h *Hub) (*members, error) {
	m := &members{h: h, tokens: map[string]string{}, paused: map[string]bool{}, first: map[string]time.Duration{}}
	c := h.client().core
	for _, ns := range []string{secretsNamespace, profilesNamespace} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("hub: namespace %s: %w", ns, err)
		}
	}
	for i := range h.opts.SecretClusters {
		name := fmt.Sprintf("member-%02d", i)
		m.secrets = append(m.secrets, name)
		life, err := m.write(ctx, name)
		if err != nil {
			return nil, err
		}
		m.first[name] = life
	}
	if h.opts.ProfileClusters > 0 {
		if err := installProfileCRD(ctx, h); err != nil {
			return nil, err
		}
	}
	for i := range h.opts.ProfileClusters {
		if err := m.putProfile(ctx, fmt.Sprintf("profile-%02d", i)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// write writes cluster's kubeconfig Secret with a new token and returns
// the token's life.
func (m *members) write(ctx context.Context, cluster string) (time.Duration, error) {
	life := m.h.tokenLife()
	tok := m.h.issue(life)
	m.h.mu.Lock()
	ca := m.h.caData
	m.h.mu.Unlock()
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: %[1]s
clusters:
- name: %[1]s
  cluster: {server: %[2]q, certificate-authority-data: %[3]s}
users:
- name: %[1]s-admin
  user: {token: %[4]q}
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: %[1]s-admin}
`, cluster, m.h.cluster.Server, base64.StdEncoding.EncodeToString(ca), tok)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName(cluster), Namespace: secretsNamespace,
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": cluster}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": []byte(kubeconfig)},
	}
	secrets := m.h.client().core.CoreV1().Secrets(secretsNamespace)
	_, err := secrets.Update(ctx, secret, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, secret, metav1.CreateOptions{})
	}
	if err != nil {
		return time.Second, fmt.Errorf("hub: writing Secret %s: %w", secret.Name, err)
	}
	m.mu.Lock()
	m.tokens[cluster] = tok
	m.mu.Unlock()
	return life, nil
}

// start rotates every Secret's token, each on its own schedule.
func (m *members) start(ctx context.Context) {
	for _, name := range m.secrets {
		m.wg.Go(func() { m.rotate(ctx, name) })
	}
}

func (m *members) rotate(ctx context.Context, cluster string) {
	next := m.first[cluster] * 2 / 3
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
		m.mu.Lock()
		paused := m.paused[cluster]
		m.mu.Unlock()
		if paused {
			next = time.Second
			continue
		}
		life, err := m.write(ctx, cluster)
		// Once per streak, for all clusters: during an API server
		// restart every one of them fails each second.
		switch {
		case err == nil && m.failing.CompareAndSwap(true, false):
			m.h.opts.Logf("hub: writing the kubeconfig Secrets again")
		case err != nil && ctx.Err() == nil && m.failing.CompareAndSwap(false, true):
			m.h.opts.Logf("%v (each cluster retries each second)", err)
		}
		next = life * 2 / 3
	}
}

func (m *members) wait() { m.wg.Wait() }

// rewriteAll rewrites every Secret and profile at once: after a CA
// rotation, their owners hand out the new CA.
func (m *members) rewriteAll(ctx context.Context) error {
	for _, name := range m.secrets {
		m.mu.Lock()
		paused := m.paused[name]
		m.mu.Unlock()
		if paused {
			continue
		}
		if _, err := m.write(ctx, name); err != nil {
			return err
		}
	}
	for i := range m.h.opts.ProfileClusters {
		if err := m.putProfile(ctx, fmt.Sprintf("profile-%02d", i)); err != nil {
			return err
		}
	}
	return nil
}

var (
	profilesGVR = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "clusterprofiles"}
	crdGVR      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// putProfile creates or updates the ClusterProfile name, offering the
// sides' plugin with the API server and its CA of the moment.
func (m *members) putProfile(ctx context.Context, name string) error {
	client := m.h.client().dyn.Resource(profilesGVR).Namespace(profilesNamespace)
	m.h.mu.Lock()
	ca := m.h.caData
	m.h.mu.Unlock()
	status := map[string]any{"accessProviders": []any{map[string]any{"name": ProviderName,
		"cluster": map[string]any{"server": m.h.cluster.Server, "certificate-authority-data": base64.StdEncoding.EncodeToString(ca)}}}}
	u, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		u, err = client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
			"metadata": map[string]any{"name": name, "namespace": profilesNamespace},
			"spec":     map[string]any{"clusterManager": map[string]any{"name": "soak"}},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("hub: ClusterProfile %s: %w", name, err)
	}
	u.Object["status"] = status
	if _, err := client.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("hub: ClusterProfile %s's status: %w", name, err)
	}
	return nil
}

func installProfileCRD(ctx context.Context, h *Hub) error {
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(manifests.ClusterProfileCRD), &crd.Object); err != nil {
		return err
	}
	dyn := h.client().dyn
	if _, err := dyn.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("hub: the ClusterProfile CRD: %w", err)
	}
	deadline := time.Now().Add(time.Minute) // bounds a hang: established within seconds
	for {
		_, err := dyn.Resource(profilesGVR).Namespace(profilesNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hub: the ClusterProfile CRD is not served a minute after its creation: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
