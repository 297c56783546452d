// Package fleet keeps many clusters authenticated in one process: one vault
// per cluster, for controllers that manage a fleet (Cluster API's
// management cluster, a GitOps hub, a multicluster controller) and read
// each cluster's kubeconfig from a Secret that rotates, or find it in a
// ClusterProfile.
//
//	f := fleet.New(fleet.Options{Logger: log, Registerer: metrics.Registry})
//	defer f.Close()
//	f.Add("prod-eu", handlers.KubeconfigSecret(hub.CoreV1(), "capi", "prod-eu-kubeconfig", "value"))
//	cfg, err := f.RESTConfig(ctx, "prod-eu") // the same object for as long as the cluster is in the fleet
//
// Here log is a logr.Logger (a fleet's default discards) and hub a
// kubernetes.Interface of the hub cluster. The guide docs/fleet.md in the
// repository walks through a fleet under a controller-runtime manager, from
// Secrets, from ClusterProfiles and shared among replicas.
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
// ("argocd") unless [SecretsOptions.Namespace] says otherwise, as
// Argo CD reads them. The kubeconfigs are read with
// handlers.KubeconfigSecretFrom: someone else wrote them, so their exec
// plugins and auth providers are refused unless [SecretsOptions.PluginPolicy]
// allows them, and entries that name a file of this machine are refused.
// With [SecretsOptions.Federated], a Cluster API kubeconfig is read for its
// server and CA only, and its cluster is reached with tokens the hub mints
// (see "Clusters from Flux ConfigMaps"): the stored credential is never used.
//
// # Clusters from ClusterProfiles
//
// [Fleet.WatchClusterProfiles] does the same for SIG-Multicluster's
// ClusterProfiles (the Cluster Inventory API): a profile adds a cluster
// named "<namespace>/<name>", reached through the first of your provider
// file's access providers (KEP-5339, [ReadProviderFile]) that its status
// offers: the provider's exec plugin runs with the profile's server and
// CA as its cluster.
//
//	providers, err := fleet.ReadProviderFile(path) // the --clusterprofile-provider-file flag
//	err = mgr.Add(f.ProfilesWatcher(fleet.ProfilesOptions{Config: mgr.GetConfig(), Namespace: "inventory", Providers: providers}))
//	cfg, err := f.RESTConfig(ctx, "inventory/prod-eu") // the cluster of the ClusterProfile inventory/prod-eu
//
// What runs is the provider file's choice, with its arguments and
// environment (and the profile's, where the provider's policies say so);
// a profile chooses the provider by name, never a command or a file. But
// whoever may write a profile's status chooses the server that provider's
// credential is sent to, as a kubeconfig's writer does: the hub's RBAC on
// clusterprofiles/status decides who receives this process's plugin
// tokens. A provider whose profileSourcedCLIArgsPolicy is Append gives
// that writer the plugin's command line as well ([AccessProvider]), but
// for the flags the provider sets (see "Arguments a profile adds").
//
// A provider served by a native cloud login (handlers.UseNative, called
// before the watch starts: its default policy is made then) takes a
// profile for someone else's kubeconfig (handlers.NativeRequest.Untrusted):
// the EKS login checks the profile's server against DescribeCluster and
// refuses an AWS profile (--profile, AWS_PROFILE) even from the provider
// file; the GKE and AKS logins refuse every profile, since their plugins
// name no cluster to check the server against. Such a provider serves no
// profile in a process that uses its native login, and its plugin does
// not run in its place.
//
// An access provider may also be served in process with no stored
// credential (AccessProvider.Federated): tokens the hub mints for a
// ServiceAccount of the profile's own namespace, given to the profile's
// server as for a Flux ConfigMap; a profile with a proxy-url is refused.
//
// # Clusters from Flux ConfigMaps, with no stored credential
//
// Fleet.WatchFlux serves Flux's remote clusters as Flux 2.7 describes
// them: a ConfigMap with the member's address, ca.crt, audiences, a
// provider (generic, aws, gcp, azure) and a serviceAccountName, and no
// secret. Its cluster, "<namespace>/<name>", logs in with
// federation.Login: the hub mints a token for that ServiceAccount, in the
// ConfigMap's own namespace (a ConfigMap that names another namespace's is
// refused), and the member trusts it (generic) or its cloud exchanges it
// (FluxOptions.Providers, from the cloud modules).
//
//	err := mgr.Add(f.FluxWatcher(fleet.FluxOptions{Config: mgr.GetConfig(), Namespace: "fleet-members"}))
//	cfg, err := f.RESTConfig(ctx, "fleet-members/prod-eu")
//
// Whoever may write a ConfigMap in a watched namespace chooses where tokens
// of that namespace's ServiceAccounts go, for which audiences: watch the
// namespaces whose writers you trust with them. Such a writer may also
// name another member's address and audience: each member must grant its
// RBAC by the ServiceAccount's user name (or namespace), never to every
// ServiceAccount of the hub. A ConfigMap's cluster gives its name up to a
// Secret's, a profile's or Add's, whichever came first. docs/federation.md
// has the member's side.
//
// # Arguments a profile adds
//
// A provider whose profileSourcedCLIArgsPolicy is Append runs its plugin
// with its own arguments, then the profile's. A plugin takes the last value
// of a flag given twice, so a profile could choose what the provider file
// fixed (the role to assume, the tenant, the region): a profile is refused,
// naming the flag and never its value, when its arguments may set again a
// flag the provider's arguments or environment set. They are read as the
// plugin reads them, for the plugins the native logins serve, whose flags
// this package knows (aws-iam-authenticator token, aws eks get-token,
// argocd-k8s-auth aws, gke-gcloud-auth-plugin, kubelogin get-token): under
// each of the plugin's names for the flag (-r and --role; -t and
// --tenant-id), in each spelling its parser takes (-rV, -r=V, -r V, --role V,
// --role=V, a one-letter flag after others that take no value, an
// abbreviation the aws CLI takes, such as --role for --role-arn), or as
// the value of a provider's flag left without one. A variable the
// plugin reads for a flag counts as that flag: a profile's AZURE_TENANT_ID
// (which kubelogin reads over --tenant-id) is refused when the provider
// sets --tenant-id, a profile's --region when the provider sets
// AWS_REGION. A flag the plugin does not have is refused too, when the
// provider sets one: a later release may have made it another name.
//
// For any other plugin, no parser tells which flags are the same: when the
// provider's own arguments hold a flag, or it sets a variable (which a
// flag may stand for, as --role for aws-iam-authenticator's DEFAULT_ROLE),
// a profile may add words but no flag (no argument that starts with "-"),
// and its variables are checked by the env policy alone.
//
// Secrets and profiles name clusters alike: in a fleet that watches both,
// a profile and a kubeconfig Secret for the same namespace and cluster
// claim one name, and the one added first has it; the other is logged
// and decided again at its next change. Watch a cluster through one of
// them. A Flux ConfigMap of that name is never first: it gives the name
// up to either, and to Add.
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
// [Fleet.SecretsWatcher] and [Fleet.ProfilesWatcher] run the watches as
// a controller-runtime manager's runnables, on the leader only unless told
// otherwise: the controllers OnAdd starts write to their clusters.
//
//	f := fleet.New(fleet.Options{Logger: log, OnAdd: func(ctx context.Context, m *fleet.Member) { go run(ctx, m) }})
//	err := mgr.Add(f.SecretsWatcher(fleet.SecretsOptions{Config: mgr.GetConfig()}))
//
// # Shards
//
// One process serves a thousand clusters (docs/benchmarks.md). To share
// them among the replicas of an operator, so that plugin runs, cloud calls
// and connections divide by the replicas and a replica's death costs
// seconds rather than all of them, set [Options.Shards]: replicas of one
// [Shards.Group] share the fleet's clusters on coordination.k8s.io/v1
// Leases in [Shards.Namespace] of the hub.
//
//	f := fleet.New(fleet.Options{Logger: log, OnAdd: start, Shards: &fleet.Shards{Config: mgr.GetConfig(), Namespace: "my-operator", Group: "clusters"}})
//	err := mgr.Add(f.SecretsWatcher(fleet.SecretsOptions{Config: mgr.GetConfig()})) // on every replica
//
// Every replica runs the watches (their NeedLeaderElection is false) and
// sees every cluster ([Fleet.Names]); only the cluster's owner has its
// [Member]: OnAdd runs there, its vault logs in there (no other replica
// calls its handler), and [Fleet.RESTConfig] serves it there; elsewhere
// RESTConfig returns an error that names the owner and matches
// [ErrNotOwned]. The owner of a cluster is the live replica that scores
// highest on its name (rendezvous hashing): a replica that joins N others
// takes about 1/(N+1) of the clusters, one that leaves moves only its own.
// Each replica writes its own Lease once per RetryPeriod, and once per
// change of the replicas it sees: never per cluster.
//
// A cluster never has two owners, where a live context (OnAdd's) or a
// vault that may still log in counts as owning. A replica that has not
// renewed its Lease for RenewDeadline gives every cluster up at once: their
// contexts end with a cause that matches ErrNotOwned, and their vaults'
// Close and their OnRemoves start together, so that no login of its runs
// once they have returned. Its peers take them once they have seen its
// Lease unchanged for the LeaseDuration that Lease states (its holder's,
// not theirs: replicas may differ in LeaseDuration, as in a rolling
// change). A replica that takes a cluster from a live peer, as one that
// joins does, waits until that peer's Lease says it has let it go: its
// vault closed. A replica that closes ([Fleet.Close]) ends its clusters'
// contexts, waits for their vaults, then marks its Lease released and
// deletes it, and the others take them at once, while its OnRemoves run
// (a slow or hung one holds up neither the release nor, past five
// seconds, Close); one killed or cut from the hub has its clusters owned
// again within LeaseDuration + 2×RetryPeriod. A
// replica that can renew its Lease but not list the others' (RBAC) claims
// no share after RenewDeadline, so that its share is not left unowned. An
// OnRemove never delays a peer's take, but a replica whose OnRemove or
// vault Close of a cluster of its share runs longer than the budget
// (below) claims no share until it returns.
//
// Every Lease of the group carries the finalizer fleet.authvault.dev/shard,
// so that a delete (kubectl delete lease during an incident, a
// DeleteCollection, the deletion of Namespace) only marks it: it stays on
// the hub, claiming what it claimed, and every replica still sees it. Its
// holder, seeing the mark, gives its clusters up, writes that it holds
// nothing, takes the finalizer off (the Lease goes) and writes a new one;
// its clusters are owned again within about LeaseDuration. A replica cut
// from the hub, or killed, keeps its Lease (marked or not) until its peers
// have seen it unchanged for its LeaseDuration: then they take its
// clusters, take the finalizer off and delete the Lease, at the version
// they saw. So a Lease leaves the hub only once no replica holds a cluster
// by it, and a replica that starts sees, in its first list, every replica
// that may hold a cluster: it claims its share at once, and takes it
// RetryPeriod and a quarter after it started (the replicas started within a
// RetryPeriod of it, as in a Deployment's first rollout, are counted first,
// so that each cluster moves once), 2.5 s and a few requests with the
// defaults. It logs, at INFO, when its share is still claimed by a peer,
// which, and why. A replica whose lists fail for a while takes again at its
// first list once they answer.
//
// The replicas find the group's Leases by name (the group, a dash and
// sixteen hex digits of a hash of the identity, as the start line says),
// not by their label, so relabelling one hides nothing; one whose view
// annotation a person took off may claim any cluster: no new take happens
// until its holder writes it again, or, if the holder is gone, until it
// expires. A Lease of such a name with no label, annotation or finalizer of
// this package's is another tool's: ignored, never deleted. Give the Leases
// a namespace with few others: each replica lists that namespace's Leases
// every RetryPeriod. What a person can still do to break it: take the
// finalizer off a Lease by hand (kubectl patch lease … --type=json -p
// '[{"op":"remove","path":"/metadata/finalizers"}]'). A replica cut from
// the hub then keeps its clusters until its RenewDeadline while its peers
// take them at once: two owners for up to RenewDeadline; one that reaches
// the hub gives them up at its next renewal, which finds its Lease gone,
// and logs why. Another finalizer on a Lease (a foreground deletion, a
// policy tool's) keeps it marked after this replica's is off: the replica
// stands by, renewing it each RetryPeriod, until it goes. A Lease written
// by a release before the finalizer (rules 2) is one a delete removes at
// once: a replica of this release stands by while one of those runs
// (below), and waits out the duration of such a Lease gone from a list;
// rolled back to such a release, a replica deletes an expired Lease of this
// one only as far as marking it, and it stays until a replica of this
// release runs or a person takes the finalizer off.
//
// When the last replica of a group is gone for good (every pod killed), its
// Leases keep their finalizers: they hold up the deletion of Namespace
// until a replica of the group starts again (it takes the finalizer off
// each once it has expired), which cannot happen when the replicas run in
// that namespace, or until a person takes the finalizers off (docs/fleet.md
// has the command). Delete the Deployment first and wait for its pods to
// go: a clean stop deletes its Lease, and then the namespace goes.
//
// What this rests on is one budget, LeaseDuration − RenewDeadline (5 s by
// default), spent once. A quarter of it is the timeout of every Lease
// request: a renewal that took longer counts for nothing, since it may
// have landed after a peer judged the Lease expired. The clocks of two
// replicas may run at rates 1% apart over LeaseDuration + RenewDeadline
// (no two clocks are compared, as in client-go's leader election). What is
// left, 3.5 s by default, must cover a stall of the replica between its
// fence's due time and the end of its clusters' contexts, and the time its
// login handlers take to return once their context ends. A vault's Close
// waits up to five seconds for a handler that ignores its context, past
// the default budget: keep handlers on their context, as every handler of
// this module is. New refuses a configuration that leaves less than
// RetryPeriod for the stall and the handlers. OnRemove is
// not in the budget: a peer may take the cluster while it still runs (its
// context and vault are done), and a replica never takes a cluster again
// before its own OnRemove of it has returned. The hub's API server is the
// one source of truth: a replica takes a cluster only after a list of the
// Leases made after its Lease said its view, a quorum read that sees every
// peer's earlier write. Replicas of one group keep their LeaseDurations
// within four times of each other (or of a minute): a longer one is read
// as that, and its replica's clusters could then have two owners. Their
// RetryPeriods and budgets may differ.
//
// The protocol is a state machine without I/O that a model test drives on
// a fake clock, its fault space the assumptions above: LeaseDurations four
// times apart; writes, lists, deletes and finalizer updates failing,
// delayed or lost, each alone; Leases deleted (marked) and, in a third of
// the runs, finalizers taken off by hand; replicas stalled, killed,
// closed, cut from the hub or joining; vault Closes within the slack and
// OnRemoves fast, slow or hung; clocks 1% apart. It checks at every step
// that no cluster has two owners (after a finalizer taken off by hand,
// for no longer than RenewDeadline and a Close), and that no cluster goes
// unowned for longer than LeaseDuration + 2×RetryPeriod and the requests'
// and Close's time past the end of the last fault that may keep it so;
// once the faults stop, that every live replica's Lease stands, unmarked
// (make model-shards runs it for long).
//
// Identity must be unique in the group: the pod's name is, the host name
// is not under hostNetwork. A process that finds its identity's Lease
// renewed by another waits, owning nothing, until that Lease has not
// changed for LeaseDuration (a restart after a kill waits as long), and
// logs why (a duplicate that starts at the moment its Lease is deleted is
// not caught, and may own its clusters beside the other for up to
// RenewDeadline). Every replica of a group must watch the same clusters,
// and each program its own Group: a replica that does not see a cluster
// (another namespace or selector, a refused Secret) cannot serve its
// share of it, and nothing says so. OnAdd of the clusters a replica takes
// runs beside its loop, one after another; OnRemove of each it gives up
// runs at once, beside its vault's Close: neither holds its Lease's
// renewals up. The placement rules (rendezvous hashing over the view) have
// a version in each Lease: while a live replica runs older rules, one of
// newer rules claims no share and logs why, so that a rollout that changes
// them never computes a cluster's owner two ways. f.Vault(name) is nil, and f.RESTConfig an ErrNotOwned, for a cluster
// this replica does not own; "owned by no replica yet" passes within
// LeaseDuration + 2×RetryPeriod. Each login of a kubeconfig Secret reads
// it through the hub client: at a thousand clusters, raise its QPS and
// Burst (client-go's default is 5 requests a second), and give
// Shards.Config a rest.Config of its own, so that Lease renewals never
// queue behind logins. The replica needs get, list, watch, create, update and
// delete on leases in Namespace, and each replica, not only a leader,
// reads the Secrets or ClusterProfiles (examples/sharded-fleet has the
// RBAC and a Deployment of three).
//
// Each replica logs one line at INFO per replica that joins or leaves the
// group, when it starts or stops claiming a share (and why), and per batch
// of clusters it gives up or takes: how many, to or from whom (the replica
// that last held them), and why. It logs one line per cluster at V(1). Its metrics carry the label
// group: authvault_fleet_shard_clusters_owned, _replicas,
// _moves_total{direction, reason}, _unowned_seconds (for each cluster that
// moved here, how long it may have had no owner: from the last sign that
// its previous holder held it, never less) and
// _lease_writes_total.
//
// # Logs and metrics
//
// The fleet says what it does at INFO, one line each: a cluster joined
// (with its source: Fleet.Add, a Secret, a ClusterProfile and its
// provider), its source changed (a Secret's kubeconfig, a profile's data or
// provider, a Secret that outranks the one that served), and it left, with
// why (its Secret deleted, no longer selected, refused, and why refused;
// its profile deleted or refused; Remove; Close). The reason it left is
// also the cause of the context OnAdd got. A watch's relist or a rewrite
// that changes nothing logs nothing.
//
// Every vault logs with the key "cluster" and registers its metrics
// (authvault_*) with the label cluster="<name>", on a registry that may
// hold the hub's own vault too (its series have cluster=""). Names are not
// secrets; a kubeconfig's content never appears in a log line or an error.
package fleet
