package fleet

import "context"

// SecretsWatcher is WatchSecrets as a runnable of a controller-runtime
// manager, which starts it with the manager and stops it with the manager:
//
//	err := mgr.Add(f.SecretsWatcher(fleet.SecretsOptions{Config: mgr.GetConfig(), Namespace: "capi"}))
//
// It is a manager.Runnable and a manager.LeaderElectionRunnable (this
// package does not import controller-runtime; the methods are what those
// interfaces ask for).
//
// # The leader only, by default
//
// The watch runs on the replica that leads, and on no other: its
// NeedLeaderElection is true unless SecretsOptions.EveryReplica is set or
// the fleet has Options.Shards, whose replicas each see every cluster and
// start only their own.
// OnAdd is where a fleet's controllers start, and those write to their
// clusters: on every replica of a manager, every cluster would have as
// many controllers as there are replicas, each reconciling the same
// objects, and each replica would log in to every cluster. Leader-only, the
// clusters join the fleet, and their controllers start, on the replica
// that wins the election; a manager that loses the election stops (its
// Start returns "leader election lost"), and the next leader builds its
// fleet from the Secrets. Set
// EveryReplica when OnAdd starts only what reads (caches behind a webhook
// or an API every replica serves), or only adds runnables to the manager
// that it starts on the leader by itself (a manager.RunnableFunc waits for
// leadership): the fleet is then ready on every replica when it takes
// over. WatchSecrets wrapped in a manager.RunnableFunc is leader-only
// too, without saying so.
type SecretsWatcher struct {
	fleet *Fleet
	opts  SecretsOptions
}

// SecretsWatcher returns a runnable that runs WatchSecrets with opts.
func (f *Fleet) SecretsWatcher(opts SecretsOptions) *SecretsWatcher {
	return &SecretsWatcher{fleet: f, opts: opts}
}

// Start runs WatchSecrets until ctx ends. It returns at once with an error
// when the options are wrong (no Config or Client, a bad LabelSelector),
// which stops the manager.
func (w *SecretsWatcher) Start(ctx context.Context) error {
	return w.fleet.WatchSecrets(ctx, w.opts)
}

// NeedLeaderElection tells a manager whether to start the watch on the
// leader only: true unless SecretsOptions.EveryReplica is set or the
// fleet has Options.Shards.
func (w *SecretsWatcher) NeedLeaderElection() bool {
	return !w.opts.EveryReplica && w.fleet.shards == nil
}

// ProfilesWatcher is WatchClusterProfiles as a runnable of a
// controller-runtime manager, on the leader only unless
// ProfilesOptions.EveryReplica is set, for the reasons SecretsWatcher
// gives:
//
//	err := mgr.Add(f.ProfilesWatcher(fleet.ProfilesOptions{Config: mgr.GetConfig(), Providers: providers}))
type ProfilesWatcher struct {
	fleet *Fleet
	opts  ProfilesOptions
}

// ProfilesWatcher returns a runnable that runs WatchClusterProfiles with
// opts.
func (f *Fleet) ProfilesWatcher(opts ProfilesOptions) *ProfilesWatcher {
	return &ProfilesWatcher{fleet: f, opts: opts}
}

// Start runs WatchClusterProfiles until ctx ends. It returns at once with
// an error when the options are wrong, which stops the manager.
func (w *ProfilesWatcher) Start(ctx context.Context) error {
	return w.fleet.WatchClusterProfiles(ctx, w.opts)
}

// NeedLeaderElection tells a manager whether to start the watch on the
// leader only: true unless ProfilesOptions.EveryReplica is set or the
// fleet has Options.Shards.
func (w *ProfilesWatcher) NeedLeaderElection() bool {
	return !w.opts.EveryReplica && w.fleet.shards == nil
}
