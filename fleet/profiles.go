package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// ProfileGroup is the API group of SIG-Multicluster's ClusterProfile, for
// the hub's RBAC rules that a profiles watch needs (get, list and watch
// clusterprofiles) and for clients of ClusterProfiles of your own.
const ProfileGroup = "multicluster.x-k8s.io"

// profileVersions are the versions of ClusterProfile the watch reads: the
// fields it uses are the same in both.
var profileVersions = []string{"v1alpha1", "v1beta1"}

// ProfilesOptions choose the ClusterProfiles of a hub cluster that make up
// a fleet, and how this process reaches their clusters.
type ProfilesOptions struct {
	// Config is the hub's: WatchClusterProfiles builds its client from it,
	// to list and watch ClusterProfiles in Namespace. Config or Client is
	// required; not both.
	Config *rest.Config
	// Client lists and watches the hub's ClusterProfiles, as Config's
	// dynamic client would.
	Client dynamic.Interface
	// Version is the ClusterProfile version to read, v1alpha1 or
	// v1beta1. Default: the version the hub prefers for
	// ProfileGroup, asked of Config's discovery; v1alpha1 with a Client,
	// or when the hub serves no ClusterProfile yet.
	Version string
	// Namespace is where the profiles are (a cluster inventory is a
	// namespace, its clusterset). Default: every namespace, which trusts
	// whoever may write a ClusterProfile's status in any namespace of the
	// hub with this process's plugin credentials: name the inventory's.
	Namespace string
	// LabelSelector chooses the profiles, in the syntax of
	// metav1.ListOptions ("x-k8s.io/cluster-manager=ocm"). Default: all.
	LabelSelector string
	// Providers are the access providers this process can use, as its
	// provider file lists them (ReadProviderFile), in order of
	// preference: a profile's cluster is reached through the first of them
	// it offers. Required.
	Providers []AccessProvider
	// PluginPolicy says which plugins the providers may run. Default: an
	// allowlist of the providers' commands, and of the native cloud logins
	// (handlers.UseNative) that serve them when WatchClusterProfiles
	// starts: call UseNative before, or a provider it serves is refused.
	// Whatever the policy, a profile never chooses a command: it chooses a
	// provider of the file by name. Under any policy but AllowAll, the
	// plugin's environment may not set a variable that steers it (see
	// AccessProvider.ProfileSourcedEnvVarsPolicy), and a native login
	// takes the profile for someone else's kubeconfig: the GKE and AKS
	// logins refuse it (see "Clusters from ClusterProfiles" in the package
	// doc).
	PluginPolicy handlers.PluginPolicy
	// Login are the options of every cluster's login handler, as for
	// vault.OnLogin. Default: login's defaults, with a timeout of 30 s.
	Login []login.Option
	// EveryReplica makes ProfilesWatcher run on every replica of a
	// manager, not on the leader only (see SecretsWatcher). Default:
	// false, the leader only, but for a fleet with Options.Shards, whose
	// watcher runs on every replica whatever this says.
	EveryReplica bool
}

// WatchClusterProfiles keeps the fleet in step with the hub's
// ClusterProfiles (SIG-Multicluster's Cluster Inventory API) until ctx
// ends: it blocks until then, and returns nil then. A profile that appears
// adds its cluster, named "<namespace>/<name>", reached through the first
// of opts.Providers that its status offers (accessProviders, or the
// deprecated credentialProviders): the provider's plugin runs, through
// handlers.Exec, with the profile's server and CA as its cluster, the
// cluster information KEP-5339 gives it (the profile's
// client.authentication.k8s.io/exec extension when the provider sets
// provideClusterInfo) and the arguments and environment the profile adds
// where the provider's policies allow. A plugin that a native cloud login
// serves runs in process; the login takes the profile for what it is,
// someone else's (handlers.NativeRequest.Untrusted).
//
// A profile whose provider's cluster data changes refreshes its cluster's
// vault; one that goes, or that no longer offers a provider of the file,
// removes its cluster, closing its vault and connections. A profile that
// offers none of the file's providers, or whose cluster data is unusable
// (no https server, a CA file, insecure-skip-tls-verify), is not added and
// runs nothing; it is logged once, by its name, and so is a change that
// makes a served profile's data unusable, which keeps the data that
// served. Of what a profile holds, the watch's log lines and errors show
// its name and the names of the providers it offers; a login's errors and
// the cluster's vault's log lines may also show its server (never user
// info, which a profile may not carry) and the variables and flags it
// adds to the plugin, by name.
//
// Beside the reference library (sigs.k8s.io/cluster-inventory-api's
// pkg/access, a rest.Config per call), on purpose: a profile's server must
// be https and its CA inline; insecure-skip-tls-verify and a proxy-url with
// user info are refused, tls-server-name and disable-compression are
// honoured; the reserved extensions must be a list and a map of strings
// (the reference's YAML decoding also takes numbers), and a malformed one
// refuses the profile even when its policy ignores it; plugins run under a
// policy (the reference runs whatever its file names, with any
// environment); and a provider's own arguments and environment are never
// changed by a profile's, where the reference appends to them, so that a
// profile's arguments reach the next profile's plugin too.
//
// The clusters stay in the fleet when WatchClusterProfiles returns; Close
// removes them. A failing list or watch (RBAC, no ClusterProfile API yet)
// is logged through Options.Logger and retried. A hub that cannot be
// reached (refused, TLS, a restart) is retried at least every 5 s, so that
// the watch is back within that much of the hub; the outage is logged
// once, and its end.
func (f *Fleet) WatchClusterProfiles(ctx context.Context, opts ProfilesOptions) error {
	client, version, err := profileClient(opts)
	if err != nil {
		return err
	}
	if err := checkProviders(opts.Providers); err != nil {
		return fmt.Errorf("fleet: WatchClusterProfiles: Providers: %w", err)
	}
	opts.Providers = slices.Clone(opts.Providers)
	if opts.PluginPolicy.PolicyType == "" {
		opts.PluginPolicy = providersPolicy(opts.Providers)
	}
	gvr := schema.GroupVersionResource{Group: ProfileGroup, Version: version, Resource: "clusterprofiles"}
	profiles := client.Resource(gvr).Namespace(opts.Namespace)
	hub := &hubWatch{what: "ClusterProfiles", log: f.opts.Logger, kv: []any{"version", version, "namespace", opts.Namespace}}
	informer, err := hub.informer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = opts.LabelSelector
			return profiles.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = opts.LabelSelector
			return profiles.Watch(ctx, o)
		},
	}, client, &unstructured.Unstructured{})
	if err != nil {
		return fmt.Errorf("fleet: watching ClusterProfiles: %w", err)
	}
	w := &profileWatch{fleet: f, opts: opts, served: map[string]*profileMember{}, logged: map[string]string{}}
	if err := informer.SetTransform(profileTransform(opts.Providers)); err != nil {
		return fmt.Errorf("fleet: watching ClusterProfiles: %w", err)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.upsert,
		UpdateFunc: func(_, obj any) { w.upsert(obj) },
		DeleteFunc: w.delete,
	}); err != nil {
		return fmt.Errorf("fleet: watching ClusterProfiles: %w", err)
	}
	informer.RunWithContext(ctx)
	w.closing.Wait()
	return nil
}

// profileClient is the dynamic client opts ask for, and the version to read.
func profileClient(opts ProfilesOptions) (dynamic.Interface, string, error) {
	version := opts.Version
	if version != "" && !slices.Contains(profileVersions, version) {
		return nil, "", fmt.Errorf("fleet: WatchClusterProfiles: Version %q is not one of %q", version, profileVersions)
	}
	switch {
	case opts.Config != nil && opts.Client != nil:
		return nil, "", errors.New("fleet: WatchClusterProfiles takes a Config or a Client, not both")
	case opts.Client != nil:
		if version == "" {
			version = profileVersions[0]
		}
		return opts.Client, version, nil
	case opts.Config == nil:
		return nil, "", errors.New("fleet: WatchClusterProfiles needs a Config or a Client")
	}
	client, err := dynamic.NewForConfig(opts.Config)
	if err != nil {
		return nil, "", fmt.Errorf("fleet: WatchClusterProfiles: a client from Config: %w", err)
	}
	if version == "" {
		version = preferredVersion(opts.Config)
	}
	return client, version, nil
}

// preferredVersion is the ClusterProfile version the hub prefers, among
// those the watch reads; the first of them when discovery cannot tell.
func preferredVersion(cfg *rest.Config) string {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return profileVersions[0]
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		return profileVersions[0]
	}
	for _, g := range groups.Groups {
		if g.Name != ProfileGroup {
			continue
		}
		if slices.Contains(profileVersions, g.PreferredVersion.Version) {
			return g.PreferredVersion.Version
		}
		for _, v := range g.Versions {
			if slices.Contains(profileVersions, v.Version) {
				return v.Version
			}
		}
	}
	return profileVersions[0]
}

// providersPolicy allows the providers' commands, and the native logins
// that serve them.
func providersPolicy(providers []AccessProvider) handlers.PluginPolicy {
	var commands, natives []string
	for _, p := range providers {
		if p.ExecConfig == nil {
			continue // served in process (Federated)
		}
		commands = append(commands, p.ExecConfig.Command)
		if name, ok := handlers.ServedNatively(*p.ExecConfig); ok {
			natives = append(natives, name)
		}
	}
	return handlers.AllowNative(handlers.Allowlist(commands...), natives...)
}

// profileTransform is the informer's transform: of a profile, the cache
// keeps its identity, its labels, the cluster data of the access
// providers the file names, and only the names of the others (for the
// log line of a profile that offers none). Whoever writes profiles chose
// their size; this process keeps what it can use. It is idempotent.
func profileTransform(providers []AccessProvider) cache.TransformFunc {
	used := map[string]bool{}
	for _, p := range providers {
		used[p.Name] = true
	}
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		out := &unstructured.Unstructured{Object: map[string]any{}}
		out.SetAPIVersion(u.GetAPIVersion())
		out.SetKind(u.GetKind())
		out.SetNamespace(u.GetNamespace())
		out.SetName(u.GetName())
		out.SetUID(u.GetUID())
		out.SetResourceVersion(u.GetResourceVersion())
		out.SetLabels(u.GetLabels())
		if status, ok := u.Object["status"].(map[string]any); ok {
			out.Object["status"] = slimStatus(status, used)
		}
		return out, nil
	}
}

// slimStatus is status' accessProviders and credentialProviders with the
// cluster data of an entry only where accessFor may use it: a provider of
// the file, the last of its name in accessProviders, else the last in
// credentialProviders (accessFor's choice). The others keep their names,
// cut to what offeredNames shows of them. A list that is not one as the
// API lays it out stays as it is, so that accessFor refuses it as it would
// the whole profile.
func slimStatus(status map[string]any, used map[string]bool) map[string]any {
	type at struct {
		list  string
		index int
	}
	lists := []string{"credentialProviders", "accessProviders"} // accessFor's order: the last wins
	kept := map[string]any{}
	winner := map[string]at{}
	for _, k := range lists {
		if v, ok := status[k]; ok {
			kept[k] = v
		}
		entries, _ := kept[k].([]any)
		for i, e := range entries {
			if name, ok := providerName(e); ok && used[name] {
				winner[name] = at{k, i}
			}
		}
	}
	for _, k := range lists {
		entries, ok := kept[k].([]any)
		if !ok {
			continue
		}
		out := slices.Clone(entries)
		for i, e := range entries {
			name, ok := providerName(e)
			if !ok || used[name] && winner[name] == (at{k, i}) {
				continue
			}
			if short := name[:min(len(name), maxShownName+1)]; !used[short] {
				name = short // shown the same, and no provider of the file's
			}
			out[i] = map[string]any{"name": name}
		}
		kept[k] = out
	}
	return kept
}

// providerName is the name of e, an entry of a status' list of providers.
func providerName(e any) (string, bool) {
	entry, ok := e.(map[string]any)
	if !ok {
		return "", false
	}
	name, ok := entry["name"].(string)
	return name, ok
}

// profileTimeout bounds each login of a profile's cluster: its plugin's run.
const profileTimeout = 30 * time.Second

// profileWatch is WatchClusterProfiles' state. The informer calls its
// handlers one at a time, from one goroutine.
type profileWatch struct {
	fleet   *Fleet
	opts    ProfilesOptions
	closing sync.WaitGroup // vaults of removed clusters being closed

	served map[string]*profileMember // by cluster name
	logged map[string]string         // by cluster name: what was last logged of a profile not served as it is, once
}

// profileMember is a cluster a profile added.
type profileMember struct {
	seat   *seat
	access atomic.Pointer[access] // read at every login
}

func (w *profileWatch) upsert(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	name := u.GetNamespace() + "/" + u.GetName()
	a, err := accessFor(u, w.opts.Providers)
	pm, held := w.served[name]
	if held && !w.fleet.holds(pm.seat) {
		delete(w.served, name) // removed by hand (Fleet.Remove): a change brings it back
		held = false
	}
	switch {
	case err != nil && held && !errors.Is(err, errNoProvider):
		w.logOnce(name, err.Error(), func() {
			w.fleet.opts.Logger.Error(err, "ClusterProfile changed to data that cannot serve; its cluster keeps the data that served", "profile", name)
		})
	case err != nil:
		if held {
			w.remove(name, pm, "refused: "+err.Error())
		}
		w.logOnce(name, err.Error(), func() {
			w.fleet.opts.Logger.Error(err, "ClusterProfile not added to the fleet", "profile", name)
		})
	case held:
		delete(w.logged, name)
		if old := pm.access.Load(); old.digest != a.digest {
			pm.access.Store(a)
			change := "its cluster data changed"
			if old.where != a.where {
				change = "its access provider changed"
				pm.seat.setSource(a.where)
			}
			w.fleet.opts.Logger.Info("cluster's source changed", "cluster", name, "source", a.where, "change", change)
			w.fleet.refresh(pm.seat)
		}
	default:
		w.add(name, a)
	}
}

func (w *profileWatch) delete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	name := u.GetNamespace() + "/" + u.GetName()
	delete(w.logged, name)
	if pm, ok := w.served[name]; ok {
		w.remove(name, pm, fmt.Sprintf("its ClusterProfile %s was deleted", name))
	}
}

// logOnce runs log unless what was the last thing logged of the profile.
func (w *profileWatch) logOnce(name, what string, log func()) {
	if w.logged[name] != what {
		w.logged[name] = what
		log()
	}
}

// add adds the cluster name, reached as a says.
func (w *profileWatch) add(name string, a *access) {
	pm := &profileMember{}
	pm.access.Store(a)
	policy := w.opts.PluginPolicy
	h := login.Named("ClusterProfile "+name, "ClusterProfile", func(ctx context.Context) (*login.ConnectionInfo, error) {
		a := pm.access.Load()
		if a.federated != nil {
			return a.federated(ctx)
		}
		info, err := handlers.Kubeconfig(handlers.KubeconfigConfig{Config: a.kubeconfig(), Name: a.where, PluginPolicy: policy})(ctx)
		if err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		return info, nil
	})
	opts := append([]login.Option{login.Timeout(profileTimeout)}, w.opts.Login...)
	s, err := w.fleet.add(name, a.where, h, opts)
	if err != nil {
		w.logOnce(name, "not added: "+err.Error(), func() {
			w.fleet.opts.Logger.Error(err, "ClusterProfile not added to the fleet", "profile", name)
		})
		return
	}
	delete(w.logged, name)
	pm.seat = s
	w.served[name] = pm
	w.fleet.joined(s, "", "")
}

// remove takes the cluster out of the fleet for reason, as
// secretWatch.remove does.
func (w *profileWatch) remove(name string, pm *profileMember, reason string) {
	delete(w.served, name)
	member, ok := w.fleet.detach(pm.seat, reason)
	if !ok {
		return
	}
	w.fleet.left(pm.seat, reason)
	w.fleet.retire(member, &w.closing)
}
