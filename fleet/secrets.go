package fleet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// ClusterNameLabel is the label Cluster API puts on a workload cluster's
// kubeconfig Secret, whose value is the cluster's name: the watch's default
// selector, exported for a LabelSelector of your own and for Secrets written
// by hand.
const ClusterNameLabel = "cluster.x-k8s.io/cluster-name"

// SecretsOptions choose the kubeconfig Secrets of a hub cluster that make
// up a fleet.
type SecretsOptions struct {
	// Config is the hub's: WatchSecrets builds its client from it, to
	// list, watch and get Secrets in Namespace (RBAC must allow those).
	// A manager's mgr.GetConfig(), or a vault's RESTConfig. Config or
	// Client is required; not both.
	Config *rest.Config
	// Client lists, watches and reads the hub's Secrets, as Config's
	// client would: a clientset of your own, or a fake one in tests.
	Client kubernetes.Interface
	// Format is how the Secrets describe their clusters. Default:
	// ClusterAPI.
	Format SecretFormat
	// Namespace is where the Secrets are. Default: every namespace; for
	// ArgoCD, "argocd", the only one Argo CD reads its cluster
	// Secrets from (a Secret labelled as one elsewhere is no cluster of
	// Argo CD's, and may have been written by anyone who can write
	// Secrets there). An Argo CD installed elsewhere needs its namespace
	// here.
	Namespace string
	// LabelSelector chooses the Secrets, in the syntax of
	// metav1.ListOptions. Default: Cluster API's, the Secrets that carry
	// ClusterNameLabel; for ArgoCD, ArgoCDSecretTypeLabel=cluster.
	// (Cluster API's kubeconfig Secrets carry ClusterNameLabel; so do its
	// CA, etcd, sa and proxy Secrets, which lack Key and are skipped: a
	// Secret without Key is no cluster's.)
	LabelSelector string
	// Key is the data key that holds the kubeconfig. Default:
	// handlers.ClusterAPIKey ("value"). Not used for ArgoCD.
	Key string
	// Federated, when set, reads each Cluster API kubeconfig for its
	// cluster's server and CA only, never its credential, and logs in
	// with tokens the hub mints for a ServiceAccount of the Secret's own
	// namespace (the Cluster's), as a ClusterProfile's provider served in
	// process does (see FederatedAccess): a fleet with no stored
	// credential from the Secrets Cluster API already writes. PluginPolicy
	// is not used then. Not for ArgoCD. Default: nil, the kubeconfig's own
	// credential.
	Federated *FederatedAccess
	// PluginPolicy says which exec plugins the kubeconfigs may run.
	// Default: handlers.DenyAll (see handlers.KubeconfigSecretConfig).
	PluginPolicy handlers.PluginPolicy
	// Login are the options of every cluster's login handler (its
	// timeout, retries, backoff), as for vault.OnLogin. Default: login's
	// defaults, with a timeout of 30 s.
	Login []login.Option
	// EveryReplica makes SecretsWatcher run on every replica of a
	// manager, not on the leader only: its NeedLeaderElection is false.
	// WatchSecrets itself ignores it. Default: false, the leader only
	// (see SecretsWatcher for why), but for a fleet with Options.Shards,
	// whose watcher runs on every replica whatever this says: each
	// replica serves its share of the clusters.
	EveryReplica bool
}

// WatchSecrets keeps the fleet in step with the hub's kubeconfig Secrets
// until ctx ends: it blocks until then, and returns nil then (run it in a
// goroutine, or as a manager's runnable: see SecretsWatcher). A Secret
// that appears adds its cluster, named "<namespace>/<cluster>", where
// <cluster> is the value of its ClusterNameLabel (for ArgoCD, its name
// key), or the Secret's name without it; its handler
// (handlers.KubeconfigSecretFrom for ClusterAPI) reads the Secret at every
// login. A Secret without SecretsOptions.Key (for ArgoCD, without server)
// is no cluster's, and is skipped. A Secret whose kubeconfig changes
// refreshes that cluster's vault at once (vault.Vault.Refresh): the new
// credential is in place before the old one is revoked, and no other
// cluster is touched; a cluster not used yet stays so. A change that
// leaves the kubeconfig as it was (a resync, a label or annotation edit)
// does nothing. A Secret that goes removes its cluster, closing its vault;
// the API server reports a Secret that lost its label as deleted, so one GET
// of a Secret that served a cluster tells the log which it was.
//
// Which Secret serves a cluster does not depend on the order they are
// listed in: the Secrets there at the start are decided together, once the
// whole list is in, so that none serves a cluster for the moment before a
// stronger claim on it is seen. For ClusterAPI, a labelled Secret claims
// the cluster only if it is <cluster>-kubeconfig, or (less strongly, since
// whoever writes Secrets can write owner references) if the Cluster of
// that name is its controller. Any other Secret labelled for a cluster, or
// with the label empty, is skipped and logged, once: a provider's
// <cluster>-user-kubeconfig, a Secret written to take a cluster's name, or
// a kubeconfig Secret of your own under another name, which was served
// before these rules (name it <cluster>-kubeconfig, or drop the label and
// choose it with LabelSelector). Of the Secrets that claim a cluster, the
// one of the highest rank serves it; two of that rank (two owned Secrets,
// two Argo CD Secrets of one name) serve neither, and both are logged,
// until one goes. A cluster of the same name added by Add is left alone,
// and the Secret that collides with it is logged and decided again at its
// next change. A Secret's cluster removed with Remove comes back when its
// Secret, or another of that cluster's, changes.
//
// The clusters stay in the fleet when WatchSecrets returns; Close removes
// them. A failing list or watch of the Secrets (RBAC, an outage) is logged
// through Options.Logger and retried. A hub that cannot be reached
// (refused, TLS, a restart) is retried every 5 s at most, so that the
// watch is back a few seconds after the hub, not after client-go's backoff
// of up to a minute; the outage is logged once, and its end.
func (f *Fleet) WatchSecrets(ctx context.Context, opts SecretsOptions) error {
	switch {
	case opts.Config != nil && opts.Client != nil:
		return errors.New("fleet: WatchSecrets takes a Config or a Client, not both")
	case opts.Config != nil:
		client, err := kubernetes.NewForConfig(opts.Config)
		if err != nil {
			return fmt.Errorf("fleet: WatchSecrets: a client from Config: %w", err)
		}
		opts.Client = client
	case opts.Client == nil:
		return errors.New("fleet: WatchSecrets needs a Config or a Client")
	}
	if opts.Key == "" {
		opts.Key = handlers.ClusterAPIKey
	}
	if opts.Format == ArgoCD && opts.Namespace == "" {
		opts.Namespace = argoCDNamespace
	}
	if opts.PluginPolicy.PolicyType == "" {
		opts.PluginPolicy = handlers.DenyAll
	}
	if opts.Federated != nil {
		if opts.Format != ClusterAPI {
			return errors.New("fleet: WatchSecrets: Federated serves Cluster API Secrets only")
		}
		if err := opts.Federated.check(); err != nil {
			return fmt.Errorf("fleet: WatchSecrets: %w", err)
		}
	}
	var format secretFormat
	switch opts.Format {
	case ClusterAPI:
		format = clusterAPIFormat(opts.Key, opts.PluginPolicy, opts.Federated)
	case ArgoCD:
		format = argoCDFormat(opts.PluginPolicy)
	default:
		return fmt.Errorf("fleet: WatchSecrets: unknown Format %d", opts.Format)
	}
	if opts.LabelSelector == "" {
		opts.LabelSelector = format.selector
	}
	selector, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return fmt.Errorf("fleet: WatchSecrets: LabelSelector: %w", err)
	}
	w := newSecretWatch(ctx, f, opts, format, selector)
	secrets := opts.Client.CoreV1().Secrets(opts.Namespace)
	hub := &hubWatch{what: "kubeconfig Secrets", log: f.opts.Logger, kv: []any{"namespace", opts.Namespace, "selector", opts.LabelSelector}}
	informer, err := hub.informer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = opts.LabelSelector
			return secrets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = opts.LabelSelector
			return secrets.Watch(ctx, o)
		},
	}, opts.Client, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("fleet: watching Secrets: %w", err)
	}
	if err := informer.SetTransform(w.slim); err != nil {
		return fmt.Errorf("fleet: watching Secrets: %w", err)
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.upsert(obj) },
		UpdateFunc: func(_, obj any) { w.upsert(obj) },
		DeleteFunc: w.delete,
	})
	if err != nil {
		return fmt.Errorf("fleet: watching Secrets: %w", err)
	}
	var running sync.WaitGroup
	running.Go(func() { informer.RunWithContext(ctx) })
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		w.decideAll()
	}
	running.Wait()
	w.closing.Wait()
	return nil
}

// secretTimeout bounds each login of a Secret's cluster: one GET of the
// Secret, and the plugin it may run.
const secretTimeout = 30 * time.Second

// secretWatch is WatchSecrets' state. The informer calls its handlers one
// at a time, from one goroutine; mu is for decideAll, which WatchSecrets
// calls once the initial list is in.
type secretWatch struct {
	ctx      context.Context // WatchSecrets'
	fleet    *Fleet
	opts     SecretsOptions
	format   secretFormat
	selector labels.Selector
	closing  sync.WaitGroup // vaults of removed clusters being closed

	mu        sync.Mutex                 // guards what follows
	synced    bool                       // the initial list is in, and decided
	claims    map[string]claim           // by the Secret's namespace/name: every Secret that claims a cluster
	byCluster map[string]map[string]bool // by cluster name: the keys of claims on it
	served    map[string]served          // by cluster name: the clusters Secrets added
	skipped   map[string]string          // by the Secret's namespace/name: the cluster a skipped Secret names, logged once
	conflicts map[string]string          // by cluster name: what keeps it from being served (ambiguous Secrets, a failed add), logged once
}

func newSecretWatch(ctx context.Context, f *Fleet, opts SecretsOptions, format secretFormat, selector labels.Selector) *secretWatch {
	return &secretWatch{ctx: ctx, fleet: f, opts: opts, format: format, selector: selector,
		claims: map[string]claim{}, byCluster: map[string]map[string]bool{}, served: map[string]served{},
		skipped: map[string]string{}, conflicts: map[string]string{}}
}

// slimType marks a Secret that slim has made.
const slimType corev1.SecretType = "fleet.authvault/slim"

// digestKey is where slim keeps the digest of what a Secret authenticates
// with: the kubeconfig (ClusterAPI), or the server and config (ArgoCD).
const digestKey = "fleet.authvault/digest"

// secretFormat is what a SecretFormat means to the watch.
type secretFormat struct {
	// selector is the default LabelSelector.
	selector string
	// slim returns what the informer's cache keeps of a Secret's data:
	// what clusterName reads, and under digestKey a digest of what
	// authenticates; without it the Secret is no cluster's.
	slim func(data map[string][]byte) map[string][]byte
	// clusterName is the cluster part of a Secret's cluster name, read
	// from what slim kept; empty for the Secret's own name.
	clusterName func(s *corev1.Secret) string
	// rank is how strongly a Secret claims the cluster it names (see
	// claimRank).
	rank func(s *corev1.Secret) claimRank
	// refusal says why a Secret ranked noClaim claims no cluster, after
	// "it": "has an empty cluster-name label".
	refusal func(s *corev1.Secret) string
	// holds is what a Secret holds that makes it a cluster's, and changed
	// what changed when its digest did: for the log.
	holds, changed string
	// handler logs in with the Secret namespace/name.
	handler func(client corev1client.SecretsGetter, namespace, name string) login.Handler
}

// clusterAPIFormat: a kubeconfig under key, the cluster named by
// ClusterNameLabel.
func clusterAPIFormat(key string, policy handlers.PluginPolicy, federated *FederatedAccess) secretFormat {
	return secretFormat{
		selector: ClusterNameLabel,
		slim: func(data map[string][]byte) map[string][]byte {
			kubeconfig, ok := data[key]
			if !ok {
				return nil
			}
			digest := sha256.Sum256(kubeconfig)
			return map[string][]byte{digestKey: digest[:]}
		},
		clusterName: func(s *corev1.Secret) string { return s.Labels[ClusterNameLabel] },
		rank:        clusterAPIRank,
		refusal:     clusterAPIRefusal,
		holds:       fmt.Sprintf("a kubeconfig under the key %q", key),
		changed:     "its kubeconfig changed",
		handler: func(client corev1client.SecretsGetter, namespace, name string) login.Handler {
			cfg := handlers.KubeconfigSecretConfig{Client: client, Namespace: namespace, Name: name, Key: key, PluginPolicy: policy}
			if federated != nil {
				cfg.ClusterOnly = federated.forCluster(namespace)
			}
			return handlers.KubeconfigSecretFrom(cfg)
		},
	}
}

// slim is the informer's transform: it keeps of a Secret what the watch
// reads (its labels, and what its format's slim keeps), so that the cache
// holds no credential (the handler reads the Secret itself at every login),
// nor any of the other keys that Cluster API's selector brings in (its CA,
// etcd and service-account Secrets). It is idempotent.
func (w *secretWatch) slim(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	var data map[string][]byte
	if s.Type == slimType {
		// Slim's own, seen again; or a Secret written with that type (the
		// API takes any) so that the cache would keep all of it: either
		// way, only what slim writes stays.
		data = map[string][]byte{}
		for _, k := range []string{digestKey, "name"} {
			if v, ok := s.Data[k]; ok {
				data[k] = v
			}
		}
	} else {
		data = w.format.slim(s.Data)
	}
	out := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion, Labels: s.Labels,
			OwnerReferences: s.OwnerReferences, // clusterAPIRank reads the controller
		},
		Type: slimType,
		Data: data,
	}
	return out, nil
}

// clusterName names a Secret's cluster: its namespace and what its format
// reads (Cluster API's label, Argo CD's name key), else the Secret's own
// name.
func (w *secretWatch) clusterName(s *corev1.Secret) string {
	name := w.format.clusterName(s)
	if name == "" {
		name = s.Name
	}
	return s.Namespace + "/" + name
}
