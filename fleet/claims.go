package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/authvault/authvault/login"
)

// Which Secret serves a cluster is decided by the Secrets alone, never by
// the order the watch sees them in: the hub's list comes sorted by name, so
// "first seen wins" let a Secret named a-prod, labelled cluster-name=prod,
// take capi/prod from prod-kubeconfig at every restart. Each Secret's claim
// has a rank; the one Secret of the highest rank serves the cluster, and
// two of that rank serve neither (both are logged) until one goes.

// claimRank is how strongly a Secret claims the cluster it names.
type claimRank int

const (
	// noClaim: the Secret names a cluster it gives no evidence of being
	// the kubeconfig of. It is skipped.
	noClaim claimRank = iota
	// ownedClaim: the Cluster of that name is the Secret's controller (an
	// owner reference; whoever may write Secrets may write one, so a
	// Secret named for the cluster outranks it).
	ownedClaim
	// namedClaim: the Secret's own name says so (Cluster API's
	// <cluster>-kubeconfig; a Secret without the label is its own
	// cluster), which no other Secret of the namespace can share.
	namedClaim
)

// clusterAPIGroup is Cluster API's API group, whose Cluster owns a workload
// cluster's kubeconfig Secret.
const clusterAPIGroup = "cluster.x-k8s.io"

// clusterAPIRank ranks a Cluster API Secret's claim on the cluster its
// ClusterNameLabel names: Cluster API writes <cluster>-kubeconfig, owned by
// the Cluster; its other Secrets of that label (<cluster>-ca, -etcd, -sa,
// -proxy; a provider's <cluster>-user-kubeconfig) are no claim. Nor is the
// label set but empty, which Cluster API never writes: the cluster would be
// named after the Secret (prod, labelled cluster-name="", would tie with
// prod-kubeconfig for prod); only a Secret without the label (under a
// custom selector) is its own cluster.
func clusterAPIRank(s *corev1.Secret) claimRank {
	cluster, labelled := s.Labels[ClusterNameLabel]
	switch {
	case !labelled:
		return namedClaim
	case cluster == "":
		return noClaim
	case s.Name == cluster+"-kubeconfig":
		return namedClaim
	case ownedByCluster(s, cluster):
		return ownedClaim
	}
	return noClaim
}

// clusterAPIRefusal says why clusterAPIRank finds no claim in s.
func clusterAPIRefusal(s *corev1.Secret) string {
	cluster := s.Labels[ClusterNameLabel]
	if cluster == "" {
		return "has an empty cluster-name label"
	}
	return fmt.Sprintf("is neither %s-kubeconfig nor controlled by Cluster %s", cluster, cluster)
}

// ownedByCluster tells whether s's controller is Cluster API's Cluster of
// that name.
func ownedByCluster(s *corev1.Secret, cluster string) bool {
	ref := metav1.GetControllerOfNoCopy(s)
	if ref == nil || ref.Kind != "Cluster" || ref.Name != cluster {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == clusterAPIGroup
}

// claim is a Secret's claim on a cluster name.
type claim struct {
	cluster string // the fleet's name for it
	rank    claimRank
	digest  []byte // of what authenticates (see digestKey)
}

// served is a cluster that a Secret added.
type served struct {
	seat   *seat
	secret string // namespace/name of the Secret that serves it
	digest []byte // of the kubeconfig it was added or refreshed with
}

func (w *secretWatch) upsert(obj any) {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := secret.Namespace + "/" + secret.Name
	digest, hasKey := secret.Data[digestKey] // slim's
	if !hasKey || !w.selector.Matches(labels.Set(secret.Labels)) {
		// The API server sends a Secret that no longer matches the
		// selector as deleted (see gone); this is for a watch that does
		// not filter. A Secret without the key is not a kubeconfig:
		// Cluster API labels a cluster's CA, etcd, sa and proxy Secrets
		// as it labels its kubeconfig.
		why := fmt.Sprintf("its Secret %s no longer holds %s", key, w.format.holds)
		if hasKey {
			why = fmt.Sprintf("its Secret %s no longer matches the label selector %s", key, w.opts.LabelSelector)
		}
		delete(w.skipped, key)
		w.drop(key, why)
		return
	}
	name := w.clusterName(secret)
	rank := w.format.rank(secret)
	if rank == noClaim {
		refusal := w.format.refusal(secret)
		// Logged once, not at every rewrite or relist of the Secret.
		if w.skipped[key] != name {
			w.skipped[key] = name
			w.fleet.opts.Logger.Info("Secret skipped: it claims no cluster", "secret", key, "cluster", name, "reason", "it "+refusal)
		}
		w.drop(key, fmt.Sprintf("refused: its Secret %s %s", key, refusal))
		return
	}
	delete(w.skipped, key)
	prev, had := w.claims[key]
	w.setClaim(key, claim{cluster: name, rank: rank, digest: digest})
	if had && prev.cluster != name {
		// Relabelled: its old cluster first, so OnRemove comes before OnAdd.
		w.resolve(prev.cluster, fmt.Sprintf("its Secret %s now names cluster %s", key, name))
	}
	w.resolve(name, "")
}

func (w *secretWatch) delete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	key := secret.Namespace + "/" + secret.Name
	why := ""
	if w.serves(key) {
		why = w.gone(secret) // a GET: not under mu
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.skipped, key)
	w.drop(key, why)
}

// serves tells whether the Secret key serves a cluster.
func (w *secretWatch) serves(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.claims[key]
	return ok && w.served[c.cluster].secret == key
}

// goneTimeout bounds the GET that tells why a Secret has gone. It runs in
// the informer's handler, so every later event waits for it: short, so that
// a mass deletion on a slow or throttled hub (client-go's rate limiter
// fails at once a wait past the deadline) delays a rotation queued behind
// it by little, at the price of a reason that names both cases.
const goneTimeout = time.Second

// gone says why a Secret that the watch reports deleted has gone from it:
// the API server reports a Secret that no longer matches the selector (its
// label removed) as deleted, with its labels of before. A GET tells the two
// apart; when it cannot, the reason names both.
func (w *secretWatch) gone(s *corev1.Secret) string {
	key := s.Namespace + "/" + s.Name
	ctx, cancel := context.WithTimeout(w.ctx, goneTimeout)
	defer cancel()
	now, err := w.opts.Client.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), err == nil && now.UID != s.UID:
		return fmt.Sprintf("its Secret %s was deleted", key)
	case err == nil && !w.selector.Matches(labels.Set(now.Labels)):
		return fmt.Sprintf("its Secret %s no longer matches the label selector %s", key, w.opts.LabelSelector)
	}
	return fmt.Sprintf("its Secret %s was deleted, or no longer matches the label selector %s", key, w.opts.LabelSelector)
}

// decideAll decides every cluster claimed, once the initial list is in.
// Until then the claims are only recorded: the informer hands the listed
// Secrets over one at a time, in name order, and a-prod, listed before
// prod-kubeconfig, would serve capi/prod (OnAdd, then OnRemove) until
// prod-kubeconfig came, at every restart.
func (w *secretWatch) decideAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.synced = true
	for _, name := range slices.Sorted(maps.Keys(w.byCluster)) {
		w.resolve(name, "")
	}
}

// drop forgets the Secret key's claim, if it had one, and decides its
// cluster again; why says what became of the Secret.
func (w *secretWatch) drop(key, why string) {
	if c, ok := w.claims[key]; ok {
		delete(w.claims, key)
		w.unindex(key, c.cluster)
		w.resolve(c.cluster, why)
	}
}

// setClaim records key's claim, in claims and in the index by cluster,
// which spares resolve a scan of every claim: 10,000 Secrets took 1.8 s to
// list and half a millisecond per rewrite.
func (w *secretWatch) setClaim(key string, c claim) {
	if prev, ok := w.claims[key]; ok {
		w.unindex(key, prev.cluster)
	}
	w.claims[key] = c
	keys := w.byCluster[c.cluster]
	if keys == nil {
		keys = map[string]bool{}
		w.byCluster[c.cluster] = keys
	}
	keys[key] = true
}

// unindex takes key out of the index of cluster.
func (w *secretWatch) unindex(key, cluster string) {
	keys := w.byCluster[cluster]
	delete(keys, key)
	if len(keys) == 0 {
		delete(w.byCluster, cluster)
	}
}

// resolve makes the cluster name served by the one Secret of the highest
// rank that claims it, or by none when there are several or none. why says
// what became of the Secret whose change called it, if any: the reason its
// cluster leaves, when that Secret served it.
func (w *secretWatch) resolve(name, why string) {
	if !w.synced {
		return // decideAll will
	}
	var top []string
	best := noClaim
	for key := range w.byCluster[name] {
		switch c := w.claims[key]; {
		case c.rank < best:
		case c.rank > best:
			best, top = c.rank, []string{key}
		default:
			top = append(top, key)
		}
	}
	slices.Sort(top)
	m, held := w.served[name]
	if held && !w.fleet.holds(m.seat) {
		// Removed by hand (Fleet.Remove) since: its Secret, still here
		// and changed, brings it back.
		delete(w.served, name)
		held = false
	}
	if len(top) == 1 && held && m.secret == top[0] {
		c := w.claims[top[0]]
		if string(c.digest) != string(m.digest) {
			w.served[name] = served{m.seat, m.secret, c.digest}
			w.fleet.opts.Logger.Info("cluster's source changed", "cluster", name, "source", m.seat.sourced(), "change", w.format.changed)
			w.fleet.refresh(m.seat)
		}
		return // else a resync, or an edit that leaves the kubeconfig alone
	}
	if held && why == "" {
		why = fmt.Sprintf("its Secret %s no longer claims it", m.secret)
	}
	switch {
	case held && len(top) == 1:
		// Another Secret takes over: one line says so.
		change := why
		if c, ok := w.claims[m.secret]; ok && c.cluster == name {
			change = fmt.Sprintf("Secret %s outranks Secret %s", top[0], m.secret)
		}
		w.replace(name, m, top[0], change)
		return
	case held && len(top) > 1:
		w.remove(name, m, fmt.Sprintf("refused: Secrets %v all claim it, and none serves it until one goes", top))
	case held:
		w.remove(name, m, why)
	}
	switch len(top) {
	case 0:
		delete(w.conflicts, name)
	case 1:
		w.add(name, top[0], "", "")
	default:
		if w.conflict(name, "ambiguous "+strings.Join(top, " ")) {
			err := fmt.Errorf("fleet: Secrets %v all claim cluster %q: none serves it until one goes", top, name)
			w.fleet.opts.Logger.Error(err, "ambiguous cluster Secrets", "cluster", name, "secrets", top)
		}
	}
}

// conflict records what keeps the cluster name from being served, and
// tells whether it is new, to be logged: not again at each rewrite of the
// Secrets involved.
func (w *secretWatch) conflict(name, what string) bool {
	if w.conflicts[name] == what {
		return false
	}
	w.conflicts[name] = what
	return true
}

// add adds the cluster name, served by the Secret key, and tells whether
// it did. previous and change are for a cluster whose source changes (see
// Fleet.joined).
func (w *secretWatch) add(name, key, previous, change string) bool {
	namespace, secretName, _ := cache.SplitMetaNamespaceKey(key)
	h := w.format.handler(w.opts.Client.CoreV1(), namespace, secretName)
	// A hub that stalls a GET holds a login no longer than secretTimeout;
	// the caller's options come after, and win. The handler names itself
	// after the Secret.
	opts := append([]login.Option{login.Timeout(secretTimeout)}, w.opts.Login...)
	s, err := w.fleet.add(name, "Secret "+key, h, opts)
	if err != nil {
		if !w.conflict(name, "not added "+key) {
			return false
		}
		if errors.Is(err, ErrExists) {
			err = fmt.Errorf("%w; the Secret is decided again at its next change or at the next change of a Secret of that cluster", err)
		}
		w.fleet.opts.Logger.Error(err, "kubeconfig Secret not added to the fleet", "secret", key, "cluster", name)
		return false
	}
	delete(w.conflicts, name)
	w.served[name] = served{s, key, w.claims[key].digest}
	w.fleet.joined(s, previous, change)
	return true
}

// remove takes m's cluster out of the fleet at once, for reason (the name
// is free for the next add, its context ends), and tells OnRemove, here,
// so that OnRemove of a cluster comes before OnAdd of the next of its
// name. It closes the vault in the background, so that a handler that
// ignores its context holds up no other cluster's events.
func (w *secretWatch) remove(name string, m served, reason string) {
	if member, ok := w.detach(name, m, reason); ok {
		w.fleet.left(m.seat, reason)
		w.fleet.retire(member, &w.closing)
	}
}

// replace serves the cluster name by the Secret key in place of m, which
// has left for change: one line says that its source changed.
func (w *secretWatch) replace(name string, m served, key, change string) {
	member, ok := w.detach(name, m, "its source changed: "+change)
	if !ok {
		w.add(name, key, "", "") // removed by hand meanwhile: a cluster joins
		return
	}
	w.fleet.retire(member, &w.closing)
	if !w.add(name, key, m.seat.sourced(), change) {
		w.fleet.left(m.seat, change)
	}
}

// detach takes m's cluster out of the fleet for reason, and returns its
// member (nil when another replica owned it) and whether it was still
// there.
func (w *secretWatch) detach(name string, m served, reason string) (*Member, bool) {
	delete(w.served, name)
	return w.fleet.detach(m.seat, reason) // false: removed by hand meanwhile
}
