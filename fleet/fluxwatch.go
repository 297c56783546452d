package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/authvault/authvault/login"
)

// WatchFlux keeps the fleet in step with the hub's Flux ConfigMaps (what a
// Kustomization's spec.kubeConfig.configMapRef names, Flux 2.7's remote
// clusters with no secret) until ctx ends: it blocks until then, and
// returns nil then. A ConfigMap with a provider key adds its cluster,
// named "<namespace>/<name>", reached with nothing stored: its vault logs
// in with federation.Login, tokens the hub mints for the ServiceAccount
// the ConfigMap names, in its own namespace, for its audiences, presented
// at its address verified with its ca.crt (generic), or exchanged by the
// FluxProvider of its provider key. The keys mean what they mean to Flux:
// provider (generic, aws, gcp, azure), address, ca.crt, audiences (one per
// line; default: the address for generic, the FluxProvider's otherwise),
// serviceAccountName and cluster (given to the FluxProvider). The address
// is required whatever the provider: the token goes where the ConfigMap
// says, and nowhere this process looks up.
//
// A ConfigMap is written by someone else, and is read as such: a
// serviceAccountName that names another namespace's ServiceAccount (or is
// no ServiceAccount's name) is refused, and so is a ConfigMap that names
// none, outside the operator's namespace, unless
// FluxOptions.ServiceAccount gives a default; an address that is no https
// URL, holds user info, a query or a fragment, is refused; so are a
// ca.crt that is no PEM (without one, the system's roots verify the
// member), an audience of the hub's own (kubernetes.default.svc), more
// than 32 audiences or one over a kilobyte, and a provider with no
// FluxProvider. A refused ConfigMap is logged once, by its name, and
// touches no other cluster; a served one that changes to one refused
// keeps what served. A ConfigMap's cluster gives its name up to a
// cluster of any other source (Add, a Secret, a ClusterProfile), even
// one seen after it: a tenant's ConfigMap "ns/x" cannot take the name of
// Cluster API's cluster x of ns. A change of what decides the credential refreshes the cluster's
// vault; a ConfigMap that goes, or loses its provider key, removes its
// cluster.
//
// The clusters stay in the fleet when WatchFlux returns; Close removes
// them. A failing list or watch is logged and retried, as for
// WatchSecrets.
func (f *Fleet) WatchFlux(ctx context.Context, opts FluxOptions) error {
	if opts.Config == nil {
		return errors.New("fleet: WatchFlux needs FluxOptions.Config: the hub, which mints the tokens")
	}
	client, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("fleet: WatchFlux: a client from Config: %w", err)
	}
	for key, p := range opts.Providers {
		if p.New == nil || p.Audiences == nil {
			return fmt.Errorf("fleet: WatchFlux: FluxOptions.Providers[%q] needs New and Audiences", key)
		}
	}
	if opts.Operator == "" {
		opts.Operator = ownServiceAccount()
	} else if ns, name, ok := strings.Cut(opts.Operator, "/"); !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return fmt.Errorf("fleet: WatchFlux: FluxOptions.Operator %q is not a ServiceAccount's \"namespace/name\"", opts.Operator)
	}
	if opts.ServiceAccount != "" && len(validation.IsDNS1123Subdomain(opts.ServiceAccount)) > 0 {
		return fmt.Errorf("fleet: WatchFlux: FluxOptions.ServiceAccount %q is not the name of a ServiceAccount (one of each ConfigMap's own namespace)", opts.ServiceAccount)
	}
	configMaps := client.CoreV1().ConfigMaps(opts.Namespace)
	hub := &hubWatch{what: "Flux ConfigMaps", log: f.opts.Logger, kv: []any{"namespace", opts.Namespace, "selector", opts.LabelSelector}}
	informer, err := hub.informer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = opts.LabelSelector
			return configMaps.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = opts.LabelSelector
			return configMaps.Watch(ctx, o)
		},
	}, client, &corev1.ConfigMap{})
	if err != nil {
		return fmt.Errorf("fleet: watching Flux ConfigMaps: %w", err)
	}
	if err := informer.SetTransform(slimFluxConfigMap); err != nil {
		return fmt.Errorf("fleet: watching Flux ConfigMaps: %w", err)
	}
	w := &fluxWatch{fleet: f, opts: opts, client: client, served: map[string]*fluxSeat{}, logged: map[string]string{}}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.upsert,
		UpdateFunc: func(_, obj any) { w.upsert(obj) },
		DeleteFunc: w.delete,
	}); err != nil {
		return fmt.Errorf("fleet: watching Flux ConfigMaps: %w", err)
	}
	informer.RunWithContext(ctx)
	w.closing.Wait()
	return nil
}

// fluxTimeout bounds each login of a Flux ConfigMap's cluster: the mint,
// and the provider's exchange or check.
const fluxTimeout = 30 * time.Second

// slimFluxConfigMap is the informer's transform: it keeps of a ConfigMap
// the keys a Flux cluster's has, so that a watch of every ConfigMap holds
// little of the others.
func slimFluxConfigMap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion}}
	if _, ok := cm.Data[fluxProvider]; ok {
		out.Data = map[string]string{}
		for _, k := range []string{fluxProvider, fluxCluster, fluxAddress, fluxCACert, fluxAudiences, fluxServiceAccount} {
			if v, ok := cm.Data[k]; ok {
				out.Data[k] = v
			}
		}
	}
	return out, nil
}

// fluxWatch is WatchFlux's state. The informer calls its handlers one at
// a time, from one goroutine.
type fluxWatch struct {
	fleet   *Fleet
	opts    FluxOptions
	client  kubernetes.Interface
	closing sync.WaitGroup // vaults of removed clusters being closed

	served map[string]*fluxSeat // by cluster name
	logged map[string]string    // by cluster name: what was last logged of a ConfigMap not served as it is
}

// fluxSeat is a cluster a ConfigMap added, and its current login.
type fluxSeat struct {
	seat    *seat
	current atomic.Pointer[fluxLogin]
}

type fluxLogin struct {
	key     string
	handler login.Handler
}

func (w *fluxWatch) upsert(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	name := cm.Namespace + "/" + cm.Name
	m, err := readFluxConfigMap(cm, w.opts)
	fs, held := w.served[name]
	if held && !w.fleet.holds(fs.seat) {
		delete(w.served, name) // removed by hand (Fleet.Remove): a change brings it back
		held = false
	}
	switch {
	case errors.Is(err, errNotFlux):
		delete(w.logged, name)
		if held {
			w.remove(name, fs, "its ConfigMap "+name+" lost its provider key")
		}
	case err != nil && held:
		w.logOnce(name, err.Error(), func() {
			w.fleet.opts.Logger.Error(err, "Flux ConfigMap changed to data that cannot serve; its cluster keeps the data that served", "configMap", name)
		})
	case err != nil:
		w.logOnce(name, err.Error(), func() {
			w.fleet.opts.Logger.Error(err, "Flux ConfigMap not added to the fleet", "configMap", name)
		})
	case held:
		delete(w.logged, name)
		if fs.current.Load().key != m.key() {
			fs.current.Store(&fluxLogin{key: m.key(), handler: m.handler(w.opts, w.client)})
			w.fleet.opts.Logger.Info("cluster's source changed", "cluster", name, "source", "Flux ConfigMap "+name, "change", "its member data changed")
			w.fleet.refresh(fs.seat)
		}
	default:
		w.add(name, m)
	}
}

func (w *fluxWatch) delete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	name := cm.Namespace + "/" + cm.Name
	delete(w.logged, name)
	if fs, ok := w.served[name]; ok {
		w.remove(name, fs, fmt.Sprintf("its ConfigMap %s was deleted", name))
	}
}

// logOnce runs log unless what was the last thing logged of the ConfigMap.
func (w *fluxWatch) logOnce(name, what string, log func()) {
	if w.logged[name] != what {
		w.logged[name] = what
		log()
	}
}

// add adds the cluster name, reached as m says.
func (w *fluxWatch) add(name string, m fluxMember) {
	fs := &fluxSeat{}
	fs.current.Store(&fluxLogin{key: m.key(), handler: m.handler(w.opts, w.client)})
	h := login.Named("Flux ConfigMap "+name, "flux", func(ctx context.Context) (*login.ConnectionInfo, error) {
		return fs.current.Load().handler(ctx)
	})
	opts := append([]login.Option{login.Timeout(fluxTimeout)}, w.opts.Login...)
	s, err := w.fleet.addYielding(name, "Flux ConfigMap "+name, h, opts)
	if err != nil {
		if errors.Is(err, ErrExists) {
			err = fmt.Errorf("%w; a cluster of any other source (Add, a Secret, a ClusterProfile) keeps its name, and the ConfigMap is decided again at its next change", err)
		}
		w.logOnce(name, "not added: "+err.Error(), func() {
			w.fleet.opts.Logger.Error(err, "Flux ConfigMap not added to the fleet", "configMap", name)
		})
		return
	}
	delete(w.logged, name)
	fs.seat = s
	w.served[name] = fs
	w.fleet.joined(s, "", "")
}

// remove takes the cluster out of the fleet for reason, as
// secretWatch.remove does.
func (w *fluxWatch) remove(name string, fs *fluxSeat, reason string) {
	delete(w.served, name)
	member, ok := w.fleet.detach(fs.seat, reason)
	if !ok {
		return
	}
	w.fleet.left(fs.seat, reason)
	w.fleet.retire(member, &w.closing)
}

// FluxWatcher is WatchFlux as a runnable of a controller-runtime manager,
// on the leader only unless FluxOptions.EveryReplica is set, for the
// reasons SecretsWatcher gives:
//
//	err := mgr.Add(f.FluxWatcher(fleet.FluxOptions{Config: mgr.GetConfig(), Namespace: "fleet-members"}))
type FluxWatcher struct {
	fleet *Fleet
	opts  FluxOptions
}

// FluxWatcher returns a runnable that runs WatchFlux with opts.
func (f *Fleet) FluxWatcher(opts FluxOptions) *FluxWatcher {
	return &FluxWatcher{fleet: f, opts: opts}
}

// Start runs WatchFlux until ctx ends. It returns at once with an error
// when the options are wrong, which stops the manager.
func (w *FluxWatcher) Start(ctx context.Context) error { return w.fleet.WatchFlux(ctx, w.opts) }

// NeedLeaderElection tells a manager whether to start the watch on the
// leader only: true unless FluxOptions.EveryReplica is set or the fleet
// has Options.Shards.
func (w *FluxWatcher) NeedLeaderElection() bool {
	return !w.opts.EveryReplica && w.fleet.shards == nil
}
