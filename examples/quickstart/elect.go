package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// runElected runs mgr with the replicas' lease "my-operator" in namespace:
// the manager's servers, caches and readiness check on every replica, the
// reconcilers that addReconcilers registers only on the one that holds the
// lease. When ctx ends the manager stops its reconcilers first, then the
// lease is handed on at once (not after its 15 s) through the vault, which
// outlives it; a lease lost any other way stops the manager with an error.
//
// This is client-go's leader election beside the manager, not the
// manager's own (Options.LeaderElection, which stays off, so mgr.Elected
// says nothing of the lease): controller-runtime reports a lease handed on
// at a clean stop as "leader election lost", an error with a stack on
// every deploy (controller-runtime#3535).
func runElected(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, namespace string, addReconcilers func() error) error {
	host, _ := os.Hostname()
	lease, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, namespace, "my-operator",
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())}, cfg, 10*time.Second)
	if err != nil {
		return err
	}
	mgrCtx, stopMgr := context.WithCancelCause(ctx)
	defer stopMgr(nil)
	electionCtx, handOn := context.WithCancel(ctrl.LoggerInto(context.WithoutCancel(ctx), ctrl.Log.WithName("leaderelection")))
	defer handOn()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: finishing{lease}, ReleaseOnCancel: true, Name: "my-operator",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				if mgrCtx.Err() != nil {
					return // elected as the manager stops
				}
				if err := addReconcilers(); err != nil {
					stopMgr(err)
				}
			},
			OnStoppedLeading: func() {
				if electionCtx.Err() == nil { // not handed on below: another replica may lead
					stopMgr(fmt.Errorf("leader election lost: lease %s not renewed for 10 s", lease.Describe()))
				}
			},
		},
	})
	if err != nil {
		return err
	}
	electionDone := make(chan struct{})
	go func() { defer close(electionDone); elector.Run(electionCtx) }()
	err = mgr.Start(mgrCtx)
	handOn() // the reconcilers have stopped
	<-electionDone
	if cause := context.Cause(mgrCtx); err == nil && ctx.Err() == nil {
		err = cause // the lease was lost, or addReconcilers failed
	}
	return err
}

// finishing lets a request on the lease that is in flight when the stop
// comes finish, within its deadline, rather than be cut off: client-go
// logs a renewal cut off as errors ("Failed to update lease
// optimistically"). The deadline stays, so that a renewal that hangs still
// ends within RenewDeadline, before the lease can pass to another replica.
type finishing struct{ resourcelock.Interface }

func (l finishing) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ctx, cancel := uncancelled(ctx)
	defer cancel()
	return l.Interface.Get(ctx)
}

func (l finishing) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	ctx, cancel := uncancelled(ctx)
	defer cancel()
	return l.Interface.Create(ctx, record)
}

func (l finishing) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	ctx, cancel := uncancelled(ctx)
	defer cancel()
	return l.Interface.Update(ctx, record)
}

// uncancelled is ctx without its cancellation but with its deadline, if
// it has one; the lease's client has a timeout of its own, 10 s.
func uncancelled(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), deadline)
	}
	return context.WithCancel(context.WithoutCancel(ctx))
}
