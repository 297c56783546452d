package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/vault"
)

// servedBy returns the Secret that serves the cluster and the server its
// credential goes to, or "" when the fleet has no such cluster.
func servedBy(t *testing.T, h *hub, name string) (secret, server string) {
	t.Helper()
	v := h.fleet.Vault(name)
	if v == nil {
		return "", ""
	}
	c, err := v.Select(ctxFor(t))
	if errors.Is(err, vault.ErrClosed) {
		return "", "" // replaced since Vault returned it: a Secret has just taken over
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return strings.TrimPrefix(strings.TrimPrefix(c.Handler, "kubeconfig Secret "), "Argo CD cluster Secret "), c.Info.Server
}

func kubeconfigSecret(namespace, name, cluster string, api *apiServer, owner *metav1.OwnerReference) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: capiLabels(cluster)},
		Data:       map[string][]byte{"value": api.kubeconfig()},
	}
	if owner != nil {
		s.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return s
}

func clusterOwner(apiVersion, kind, name string, controller bool) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("u-" + name), Controller: ptr.To(controller)}
}

// Issue 20, item 2: a Secret named a-prod, labelled cluster-name=prod, was
// listed before prod-kubeconfig and took capi/prod, at every restart: the
// controllers engaged on it talked to its writer's server. Only the
// cluster's own kubeconfig Secret claims the name now, whatever the order.
func TestClusterAPINameIsClaimedByItsKubeconfigSecret(t *testing.T) {
	for _, order := range []string{"impostor first", "real first", "both there at start"} {
		t.Run(order, func(t *testing.T) {
			real, evil := newAPIServer(t), newAPIServer(t)
			realSecret := kubeconfigSecret("capi", "prod-kubeconfig", "prod", real, nil)
			impostor := kubeconfigSecret("capi", "a-prod", "prod", evil, nil)
			var h *hub
			switch order {
			case "impostor first":
				h = newHub(t, SecretsOptions{})
				h.put("capi", impostor.Name, impostor.Labels, impostor.Data)
				h.barrier()
				h.put("capi", realSecret.Name, realSecret.Labels, realSecret.Data)
			case "real first":
				h = newHub(t, SecretsOptions{})
				h.put("capi", realSecret.Name, realSecret.Labels, realSecret.Data)
				h.put("capi", impostor.Name, impostor.Labels, impostor.Data)
			default:
				h = newHub(t, SecretsOptions{}, impostor, realSecret)
			}
			eventually(t, "capi/prod", func() bool { return h.fleet.Vault("capi/prod") != nil })
			h.barrier()
			secret, server := servedBy(t, h, "capi/prod")
			if secret != "capi/prod-kubeconfig" || server != real.srv.URL {
				t.Errorf("capi/prod served by %s at %s, want capi/prod-kubeconfig at %s", secret, server, real.srv.URL)
			}
			if added, _ := h.events(); added != "capi/prod" {
				t.Errorf("OnAdd saw %q, want capi/prod once", added)
			}
			if logs := h.logs.String(); !strings.Contains(logs, "a-prod") || strings.Contains(logs, string(evil.kubeconfig())) {
				t.Errorf("the skipped Secret is not named in the logs, or its content is:\n%s", logs)
			}
		})
	}
}

// A Secret that the Cluster controls claims its name where no
// <cluster>-kubeconfig does (a custom name); one that arrives later takes
// over. Owner references of another kind, group or name, or that are not
// the controller, are no claim.
func TestClusterAPIOwnedSecretClaims(t *testing.T) {
	h := newHub(t, SecretsOptions{})
	owned, named := newAPIServer(t), newAPIServer(t)
	for i, owner := range []*metav1.OwnerReference{
		clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "other", true),
		clusterOwner("evil.example/v1", "Cluster", "wl1", true),
		clusterOwner("cluster.x-k8s.io/v1beta1", "Machine", "wl1", true),
		clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl1", false),
	} {
		s := kubeconfigSecret("capi", fmt.Sprintf("not-%d", i), "wl1", owned, owner)
		if _, err := h.client.CoreV1().Secrets("capi").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.barrier()
	if h.fleet.Vault("capi/wl1") != nil {
		t.Fatal("a Secret the Cluster does not control claimed capi/wl1")
	}
	s := kubeconfigSecret("capi", "wl1-custom", "wl1", owned, clusterOwner("cluster.x-k8s.io/v1beta2", "Cluster", "wl1", true))
	if _, err := h.client.CoreV1().Secrets("capi").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the owned Secret's cluster", func() bool { return h.fleet.Vault("capi/wl1") != nil })
	if secret, _ := servedBy(t, h, "capi/wl1"); secret != "capi/wl1-custom" {
		t.Errorf("capi/wl1 served by %s, want capi/wl1-custom", secret)
	}
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": named.kubeconfig()})
	eventually(t, "wl1-kubeconfig to take over", func() bool {
		secret, server := servedBy(t, h, "capi/wl1")
		return secret == "capi/wl1-kubeconfig" && server == named.srv.URL
	})
	h.barrier() // it serves before OnAdd is told
	if added, removed := h.events(); added != "capi/wl1,capi/wl1" || removed != "capi/wl1" {
		t.Errorf("OnAdd %q, OnRemove %q: want the owned Secret's cluster removed before the named one's is added", added, removed)
	}
}

// Two Secrets of the same rank claim one cluster: neither serves it, both
// are logged, and the one left serves it once the other goes. A cluster a
// Secret served until then is removed: its controllers must not go on
// with a server someone else may have written.
func TestAmbiguousClaimsServeNeither(t *testing.T) {
	ctx := ctxFor(t)
	a, b := newAPIServer(t), newAPIServer(t)
	owner := clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl1", true)
	h := newHub(t, SecretsOptions{}, kubeconfigSecret("capi", "wl1-first", "wl1", a, owner))
	eventually(t, "capi/wl1", func() bool { return h.fleet.Vault("capi/wl1") != nil })
	s := kubeconfigSecret("capi", "wl1-second", "wl1", b, owner)
	if _, err := h.client.CoreV1().Secrets("capi").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "capi/wl1 to go", func() bool { return h.fleet.Vault("capi/wl1") == nil })
	// Logged once the cluster has gone.
	eventually(t, "the ambiguity logged with both Secrets", func() bool {
		return lineCount(h.logs, "ambiguous", "capi/wl1-first", "capi/wl1-second") == 1
	})
	if err := h.client.CoreV1().Secrets("capi").Delete(ctx, "wl1-first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "wl1-second to serve", func() bool {
		secret, server := servedBy(t, h, "capi/wl1")
		return secret == "capi/wl1-second" && server == b.srv.URL
	})
}

// Without the label (a custom selector), a Secret's cluster is its own
// name, which no other Secret shares.
func TestUnlabelledSecretIsItsOwnCluster(t *testing.T) {
	api := newAPIServer(t)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "edge", Labels: map[string]string{"fleet": "yes"}},
		Data:       map[string][]byte{"value": api.kubeconfig()},
	}
	h := newHub(t, SecretsOptions{LabelSelector: "fleet=yes"}, []runtime.Object{s}...)
	eventually(t, "team/edge", func() bool { return h.fleet.Vault("team/edge") != nil })
}

// The cluster-name label set but empty named the cluster after the Secret,
// at the rank of <cluster>-kubeconfig: a Secret named prod, labelled
// cluster-name="", tied with prod-kubeconfig for capi/prod, and the real
// cluster went (or never came), whatever the order. Cluster API never
// writes an empty label: such a Secret names no cluster, and is skipped.
func TestClusterAPIEmptyLabelClaimsNothing(t *testing.T) {
	for _, order := range []string{"impostor first", "real first"} {
		t.Run(order, func(t *testing.T) {
			real, evil := newAPIServer(t), newAPIServer(t)
			h := newHub(t, SecretsOptions{})
			impostor := func() { h.put("capi", "prod", capiLabels(""), map[string][]byte{"value": evil.kubeconfig()}) }
			realSecret := func() {
				h.put("capi", "prod-kubeconfig", capiLabels("prod"), map[string][]byte{"value": real.kubeconfig()})
			}
			if order == "impostor first" {
				impostor()
				h.barrier()
				if h.fleet.Vault("capi/prod") != nil {
					t.Error("a Secret with an empty cluster-name label took capi/prod")
				}
				realSecret()
			} else {
				realSecret()
				eventually(t, "capi/prod", func() bool { return h.fleet.Vault("capi/prod") != nil })
				impostor()
			}
			h.barrier()
			if secret, server := servedBy(t, h, "capi/prod"); secret != "capi/prod-kubeconfig" || server != real.srv.URL {
				t.Errorf("capi/prod served by %q at %q, want capi/prod-kubeconfig at %s", secret, server, real.srv.URL)
			}
			if added, removed := h.events(); added != "capi/prod" || removed != "" {
				t.Errorf("OnAdd %q, OnRemove %q: want capi/prod added once and never removed", added, removed)
			}
		})
	}
}

// A skipped Secret is logged when it starts being skipped, not again at
// each of its updates (Cluster API providers rewrite theirs every few
// minutes; a relist sends every one again): a fleet of a thousand clusters
// would log a thousand lines at each.
func TestSkippedSecretIsLoggedOnce(t *testing.T) {
	h := newHub(t, SecretsOptions{})
	api := newAPIServer(t)
	for range 5 {
		api.rotate()
		h.put("capi", "wl1-user-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	}
	h.barrier()
	if got := strings.Count(h.logs.String(), `"secret"="capi/wl1-user-kubeconfig"`); got != 1 {
		t.Errorf("the skipped Secret was logged %d times over 5 writes, want once:\n%s", got, h.logs.String())
	}
	// Once it has left the selection (its label gone) and comes back, it
	// is logged again.
	h.put("capi", "wl1-user-kubeconfig", nil, map[string][]byte{"value": api.kubeconfig()}) // out of the selection
	h.barrier()
	h.put("capi", "wl1-user-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
	h.barrier()
	if got := strings.Count(h.logs.String(), `"secret"="capi/wl1-user-kubeconfig"`); got != 2 {
		t.Errorf("the Secret skipped again after it left was logged %d times in all, want twice", got)
	}
}

// A Secret that moves to another cluster (its label and its controller
// changed) leaves its old cluster to the claims still on it: a tie broken
// by the move serves the one left. Its old cluster is decided first, so
// OnRemove of the old name comes before OnAdd of the new.
func TestClaimMovesBetweenClusters(t *testing.T) {
	ctx := ctxFor(t)
	a, b := newAPIServer(t), newAPIServer(t)
	h := newHub(t, SecretsOptions{},
		kubeconfigSecret("capi", "wl1-a", "wl1", a, clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl1", true)),
		kubeconfigSecret("capi", "wl1-b", "wl1", b, clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl1", true)))
	h.barrier()
	if h.fleet.Vault("capi/wl1") != nil {
		t.Fatal("two owned Secrets: one serves capi/wl1")
	}
	moved := kubeconfigSecret("capi", "wl1-b", "wl2", b, clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl2", true))
	if _, err := h.client.CoreV1().Secrets("capi").Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both clusters", func() bool { return len(h.fleet.Names()) == 3 }) // and the barrier's
	if secret, _ := servedBy(t, h, "capi/wl1"); secret != "capi/wl1-a" {
		t.Errorf("capi/wl1 served by %q, want capi/wl1-a, the claim left on it", secret)
	}
	if secret, _ := servedBy(t, h, "capi/wl2"); secret != "capi/wl1-b" {
		t.Errorf("capi/wl2 served by %q, want capi/wl1-b", secret)
	}
	// Back to wl1: a tie again, and wl2 has no claim.
	back := kubeconfigSecret("capi", "wl1-b", "wl1", b, clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl1", true))
	if _, err := h.client.CoreV1().Secrets("capi").Update(ctx, back, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both to go", func() bool { return h.fleet.Vault("capi/wl1") == nil && h.fleet.Vault("capi/wl2") == nil })
	h.barrier() // they leave before OnRemove is told
	if added, removed := h.events(); added != "capi/wl1,capi/wl2" || removed != "capi/wl2,capi/wl1" {
		t.Errorf("OnAdd %q, OnRemove %q", added, removed)
	}
}

// At a restart the informer hands the listed Secrets over one at a time, in
// name order: a-prod, which a Secret's writer made "controlled" by Cluster
// prod (any writer of Secrets can write an owner reference), came before
// prod-kubeconfig and served capi/prod alone until prod-kubeconfig's event:
// OnAdd started the controllers against its writer's server at every
// restart, and OnRemove stopped them a moment later. The initial list is
// decided as a whole, once it is all in.
func TestInitialListIsDecidedAsAWhole(t *testing.T) {
	real, evil := newAPIServer(t), newAPIServer(t)
	h := newHub(t, SecretsOptions{},
		kubeconfigSecret("capi", "a-prod", "prod", evil, clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "prod", true)),
		kubeconfigSecret("capi", "prod-kubeconfig", "prod", real, nil),
		kubeconfigSecret("capi", "a-wl1", "wl1", evil, clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl1", true)),
		kubeconfigSecret("capi", "b-wl1", "wl1", real, clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl1", true)))
	eventually(t, "capi/prod", func() bool { return h.fleet.Vault("capi/prod") != nil })
	h.barrier()
	if secret, _ := servedBy(t, h, "capi/prod"); secret != "capi/prod-kubeconfig" {
		t.Errorf("capi/prod served by %q, want capi/prod-kubeconfig", secret)
	}
	if added, removed := h.events(); added != "capi/prod" || removed != "" {
		t.Errorf("OnAdd %q, OnRemove %q: want capi/prod added once, and capi/wl1 (a tie) never", added, removed)
	}
}

// Anyone who writes Secrets can give one the type slim marks its own with:
// it passed the transform whole, and the cache kept its every key (a
// megabyte each, any number of Secrets). A Secret of that type keeps only
// what slim writes, whether slim made it or not.
func TestSlimOfASecretTypedAsSlim(t *testing.T) {
	for _, w := range []*secretWatch{{format: clusterAPIFormat("value", handlers.DenyAll, nil)}, {format: argoCDFormat(handlers.DenyAll)}} {
		forged := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "big", Labels: capiLabels("wl1")},
			Type:       slimType,
			Data:       map[string][]byte{"value": make([]byte, 1<<20), "tls.key": []byte("PRIVATE KEY"), "name": []byte("n"), digestKey: []byte("d")},
		}
		out, err := w.slim(forged)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(maps.Keys(out.(*corev1.Secret).Data)); !slices.Equal(got, []string{digestKey, "name"}) {
			t.Errorf("slim kept the keys %q of a Secret typed %s", got, slimType)
		}
		// What slim made goes through again unchanged.
		in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "wl1-kubeconfig", Labels: capiLabels("wl1")},
			Data: map[string][]byte{"value": []byte("kubeconfig"), "name": []byte("n"), "server": []byte("https://a.example")}}
		once, _ := w.slim(in)
		twice, _ := w.slim(once)
		if !reflect.DeepEqual(once, twice) {
			t.Errorf("slim is not idempotent: %v, then %v", once, twice)
		}
	}
}

// An ambiguity, or a collision with a cluster added by hand, is logged
// when it arises, not again at each rewrite of the Secrets involved (Cluster
// API's EKS provider rewrites its kubeconfig Secrets every few minutes): an
// error line per rewrite per cluster would bury the rest.
func TestConflictsAreLoggedOnce(t *testing.T) {
	ctx := ctxFor(t)
	a, b, mine := newAPIServer(t), newAPIServer(t), newAPIServer(t)
	owner := clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl1", true)
	h := newHub(t, SecretsOptions{}, kubeconfigSecret("capi", "wl1-a", "wl1", a, owner), kubeconfigSecret("capi", "wl1-b", "wl1", b, owner))
	if err := h.fleet.Add("capi/wl2", mine.login); err != nil {
		t.Fatal(err)
	}
	h.put("capi", "wl2-kubeconfig", capiLabels("wl2"), map[string][]byte{"value": a.kubeconfig()})
	h.barrier()
	for range 5 {
		a.rotate()
		if _, err := h.client.CoreV1().Secrets("capi").Update(ctx, kubeconfigSecret("capi", "wl1-a", "wl1", a, owner), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.put("capi", "wl2-kubeconfig", capiLabels("wl2"), map[string][]byte{"value": a.kubeconfig()})
	}
	h.barrier()
	logs := h.logs.String()
	if got := strings.Count(logs, "ambiguous cluster Secrets"); got != 1 {
		t.Errorf("the ambiguity was logged %d times over 5 rewrites, want once", got)
	}
	if got := strings.Count(logs, "not added to the fleet"); got != 1 {
		t.Errorf("the collision was logged %d times over 5 rewrites, want once", got)
	}
	// Once resolved and arising again, it is logged again.
	if err := h.client.CoreV1().Secrets("capi").Delete(ctx, "wl1-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "wl1-a to serve", func() bool { return h.fleet.Vault("capi/wl1") != nil })
	if _, err := h.client.CoreV1().Secrets("capi").Create(ctx, kubeconfigSecret("capi", "wl1-b", "wl1", b, owner), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the tie again", func() bool { return h.fleet.Vault("capi/wl1") == nil })
	if got := strings.Count(h.logs.String(), "ambiguous cluster Secrets"); got != 2 {
		t.Errorf("the ambiguity, arisen again, was logged %d times in all, want twice", got)
	}
}
