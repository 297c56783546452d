// Package fleet keeps many clusters authenticated in one process: one vault
// per cluster, for controllers that manage a fleet (Cluster API's
// management cluster, a GitOps hub) and read each cluster's kubeconfig from
// a Secret that rotates.
//
//	f := fleet.New(fleet.Options{Logger: log, Registerer: metrics.Registry})
//	defer f.Close()
//	f.Add("prod-eu", handlers.KubeconfigSecret(hub.CoreV1(), "capi", "prod-eu-kubeconfig", "value"))
//	cfg, err := f.RESTConfig(ctx, "prod-eu") // the same object for as long as the cluster is in the fleet
//
// # One config per cluster, for good
//
// What controllers do today when a cluster's kubeconfig rotates is build a
// new rest.Config, clientset and informers from it, and leave the old ones
// behind: the informers relist, and client-go's transport cache keeps a
// transport for every kubeconfig it has seen. Here a cluster's
// [Fleet.RESTConfig] stays the same object while its credentials rotate
// underneath, in its vault: informers and caches are built once, and the
// connections of a rotated token close once idle.
//
// # Clusters from Secrets
//
// [Fleet.WatchSecrets] keeps the fleet in step with the kubeconfig Secrets
// of a hub cluster (Cluster API's <cluster>-kubeconfig by default): a Secret
// that appears adds its cluster, one that goes removes it, and one whose
// kubeconfig changes refreshes its cluster's vault at once, before the old
// token is revoked. Only <cluster>-kubeconfig, or a Secret the Cluster
// controls, claims a cluster's name; another Secret labelled for the
// cluster is skipped and logged. Two claims of equal weight serve neither,
// and a Secret written to take a cluster's name from its
// <cluster>-kubeconfig does not get it, even listed first. Argo CD's declarative cluster Secrets work the same way ([ArgoCD]:
// name, server and a JSON config; an awsAuthConfig runs argocd-k8s-auth, as
// Argo CD does). They are read from Argo CD's own namespace
// ([ArgoCDNamespace]) unless [SecretsOptions.Namespace] says otherwise, as
// Argo CD reads them. The kubeconfigs are read with
// handlers.KubeconfigSecretFrom: someone else wrote them, so their exec
// plugins and auth providers are refused unless [SecretsOptions.PluginPolicy]
// allows them, and entries that name a file of this machine are refused.
//
// # Lifecycle
//
// A cluster's vault logs in when its config is first used, not when it is
// added: a fleet of a thousand clusters that a controller touches a few of
// at a time costs a few logins. [Fleet.Remove] closes the cluster's vault: its
// logins stop, its connections close, its metrics go.
//
// [Options.OnAdd] gets each cluster as it joins, a [Member], with a context
// that ends when it leaves: start what runs against the cluster (a
// cluster.Cluster and its controllers) on that context, and let that, not
// OnAdd, call [Member.RESTConfig], which waits for the first login.
// [Fleet.SecretsWatcher] runs WatchSecrets as a controller-runtime
// manager's runnable, on the leader only unless told otherwise: the
// controllers OnAdd starts write to their clusters.
//
//	f := fleet.New(fleet.Options{OnAdd: func(ctx context.Context, m *fleet.Member) { go run(ctx, m) }})
//	err := mgr.Add(f.SecretsWatcher(fleet.SecretsOptions{Config: mgr.GetConfig()}))
//
// # Logs and metrics
//
// Every vault logs with the key "cluster" and registers its metrics
// (authvault_*) with the label cluster="<name>". Names are not secrets; a
// kubeconfig's content never appears in a log line or an error.
package fleet
