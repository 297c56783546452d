package side

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterNameLabel is Cluster API's label on a cluster's kubeconfig
// Secret, whose value is the cluster's name.
const clusterNameLabel = "cluster.x-k8s.io/cluster-name"

// kubeconfigKey is the key of the kubeconfig in Cluster API's Secret.
const kubeconfigKey = "value"

// profilesGVR are SIG-Multicluster's ClusterProfiles.
var profilesGVR = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "clusterprofiles"}

// clientGoFleet keeps a clientset per cluster the way controllers do
// today: an informer on the Secrets and one on the ClusterProfiles, and a
// new rest.Config and clientset from each object as it changes.
type clientGoFleet struct {
	log       logr.Logger
	providers []provider

	mu      sync.Mutex // guards clients, configs
	clients map[string]kubernetes.Interface
	configs map[string]*rest.Config // each client's
}

func newClientGoFleet(log logr.Logger, providers []provider) *clientGoFleet {
	return &clientGoFleet{log: log, providers: providers, clients: map[string]kubernetes.Interface{}, configs: map[string]*rest.Config{}}
}

// run keeps the fleet in step with the hub's Secrets and ClusterProfiles
// until ctx ends; the clusters named as authvault's fleet names them:
// "<namespace>/<cluster>" and "<namespace>/<profile>".
func (f *clientGoFleet) run(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, secretsNS, profilesNS string) {
	secrets := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(secretsNS),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = clusterNameLabel }))
	profiles := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, profilesNS, nil)
	_, err := secrets.Core().V1().Secrets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    f.secret,
		UpdateFunc: func(_, obj any) { f.secret(obj) },
		DeleteFunc: func(obj any) { f.gone(obj, secretCluster) },
	})
	if err != nil {
		f.log.Error(err, "watching the fleet's Secrets")
	}
	_, err = profiles.ForResource(profilesGVR).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    f.profile,
		UpdateFunc: func(_, obj any) { f.profile(obj) },
		DeleteFunc: func(obj any) { f.gone(obj, profileCluster) },
	})
	if err != nil {
		f.log.Error(err, "watching the fleet's ClusterProfiles")
	}
	secrets.Start(ctx.Done())
	profiles.Start(ctx.Done())
	<-ctx.Done()
	secrets.Shutdown()
	profiles.Shutdown()
}

// secretCluster is the cluster a kubeconfig Secret is for.
func secretCluster(o metav1.Object) string {
	name := o.GetLabels()[clusterNameLabel]
	if name == "" {
		name = strings.TrimSuffix(o.GetName(), "-kubeconfig")
	}
	return o.GetNamespace() + "/" + name
}

// profileCluster is a ClusterProfile's cluster.
func profileCluster(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

func (f *clientGoFleet) secret(obj any) {
	s, ok := obj.(*corev1.Secret)
	if !ok || len(s.Data[kubeconfigKey]) == 0 {
		return
	}
	name := secretCluster(s)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[kubeconfigKey])
	if err != nil {
		// clientcmd's errors name the fields, not their content.
		f.log.Error(err, "a kubeconfig Secret that does not load", "cluster", name)
		return
	}
	f.set(name, cfg)
}

func (f *clientGoFleet) profile(obj any) {
	p, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	name := profileCluster(p)
	cfg, err := profileConfig(p, f.providers)
	if err != nil {
		f.log.Error(err, "a ClusterProfile that does not serve", "cluster", name)
		return
	}
	f.set(name, cfg)
}

// set makes a new clientset from cfg the named cluster's, replacing the
// one it had.
func (f *clientGoFleet) set(name string, cfg *rest.Config) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		f.log.Error(err, "a client for a fleet cluster", "cluster", name)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.clients[name]; !ok {
		f.log.Info("cluster joined the fleet", "cluster", name)
	}
	f.clients[name], f.configs[name] = cs, cfg
}

// gone removes the cluster of the deleted object obj.
func (f *clientGoFleet) gone(obj any, cluster func(metav1.Object) string) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	name := cluster(o)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.clients[name]; ok {
		f.log.Info("cluster left the fleet", "cluster", name)
		closeIdle(f.configs[name])
		delete(f.clients, name)
		delete(f.configs, name)
	}
}

// closeIdle closes the idle connections of the clusters' transports.
func (f *clientGoFleet) closeIdle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cfg := range f.configs {
		closeIdle(cfg)
	}
}

func (f *clientGoFleet) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.clients))
	for name := range f.clients {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (f *clientGoFleet) client(_ context.Context, name string) (kubernetes.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs, ok := f.clients[name]
	if !ok {
		return nil, errNoCluster
	}
	return cs, nil
}

// moved is never: client-go's side is one process with every cluster.
func (f *clientGoFleet) moved(string) bool { return false }
