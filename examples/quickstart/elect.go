package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The lease's timings: controller-runtime's defaults. A replica that has
// not renewed for renewDeadline stops; another takes the lease once it has
// not been renewed for leaseDuration.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// errLeaseLost is what runElected returns when the lease went to another
// replica, or could not be renewed, while the manager ran.
var errLeaseLost = errors.New("leader election lost")

// runElected runs mgr on every replica (its caches, servers and readiness
// check) and, on the replica that holds the Lease namespace/name, the
// reconcilers that addReconcilers registers: it calls addReconcilers once
// this replica is elected and the manager's caches have started. When ctx
// ends the manager stops them, and only then is the lease handed on at
// once, not after its 15 s, through the vault, which outlives it. The
// lease is left to expire instead when the manager's Start failed (its
// graceful shutdown timed out with a reconciler still running, a runnable
// failed) and when renewals failed. A lease lost while the manager runs
// stops it and returns errLeaseLost at once, without waiting for the
// reconcilers: another replica may lead already. Keep the manager's
// GracefulShutdownTimeout above 0: at 0 its Start returns without waiting
// for the reconcilers, and the lease would be handed on beside them.
//
// This is client-go's leader election beside the manager, in place of
// the manager's own (Options.LeaderElection stays off, so mgr.Elected and
// NeedLeaderElection no longer say anything about the lease: a runnable for
// the leader alone goes into addReconcilers). controller-runtime v0.23 to
// v0.25 report a lease handed on at a clean stop as "leader election lost",
// an error with a stack on every deploy (controller-runtime#3535); once a
// release of theirs does not, the manager's own election is the simpler
// choice again.
func runElected(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, namespace, name string, addReconcilers func() error) error {
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	// The lease's client times out after renewDeadline/2.
	lease, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, namespace, name,
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())}, cfg, renewDeadline)
	if err != nil {
		return err
	}
	held := &heldLease{Interface: lease}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr()
	electionCtx, stopElection := context.WithCancel(ctrl.LoggerInto(context.WithoutCancel(ctx), ctrl.Log.WithName("leaderelection")))
	defer stopElection()
	var (
		adding    sync.Mutex // held while addReconcilers runs
		stopped   bool       // the manager has stopped: add nothing
		addFailed = make(chan error, 1)
		lost      = make(chan struct{})
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		// Released only once runElected allows it (see heldLease).
		Lock: held, ReleaseOnCancel: true, Name: name,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				adding.Lock()
				defer adding.Unlock()
				if stopped || mgrCtx.Err() != nil {
					return // elected as the manager stops
				}
				if err := addReconcilers(); err != nil {
					addFailed <- err
					stopMgr()
				}
			},
			OnStoppedLeading: func() {
				if electionCtx.Err() == nil { // not stopped below: the lease is gone
					close(lost)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	managerDone := make(chan error, 1)
	go func() { managerDone <- mgr.Start(mgrCtx) }()
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		// Stand for election once the caches have started, as the
		// manager's own election does.
		if mgr.GetCache().WaitForCacheSync(mgrCtx) {
			elector.Run(electionCtx)
		}
	}()
	// addReconcilers is not called again, nor still running, once this
	// replica stops.
	noMoreAdding := func() {
		adding.Lock()
		stopped = true
		adding.Unlock()
	}
	lostErr := fmt.Errorf("%w: lease %s not renewed for %s", errLeaseLost, lease.Describe(), renewDeadline)
	select {
	case <-lost:
		stopMgr()
		noMoreAdding()
		return lostErr
	case err = <-managerDone:
	}
	stopMgr()
	noMoreAdding()
	if err == nil {
		select {
		case err = <-addFailed:
		default:
		}
		held.release.Store(true) // the reconcilers have stopped
	}
	stopElection()
	<-electionDone
	select {
	case <-lost: // during the manager's graceful shutdown
		return lostErr
	default:
		return err
	}
}

// heldLease is the lease as runElected holds it. A request that is in
// flight when the stop comes finishes, within its deadline, rather than
// being cut off: client-go logs a renewal cut off as errors ("Failed to
// update lease optimistically"). The deadline stays, so that a renewal
// that hangs still ends within RenewDeadline, before the lease can pass
// to another replica. The release (an Update that names no holder) is
// written only once release is set: client-go also releases a lease whose
// renewals failed, before it says the lease is lost, while the
// reconcilers still run; unreleased, a lease expires after leaseDuration.
type heldLease struct {
	resourcelock.Interface
	release atomic.Bool
}

func (l *heldLease) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ctx, cancel := uncancelled(ctx)
	defer cancel()
	return l.Interface.Get(ctx)
}

func (l *heldLease) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	ctx, cancel := uncancelled(ctx)
	defer cancel()
	return l.Interface.Create(ctx, record)
}

func (l *heldLease) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if record.HolderIdentity == "" && !l.release.Load() {
		return nil // left to expire
	}
	ctx, cancel := uncancelled(ctx)
	defer cancel()
	return l.Interface.Update(ctx, record)
}

// uncancelled is ctx without its cancellation but with its deadline, if
// it has one.
func uncancelled(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), deadline)
	}
	return context.WithCancel(context.WithoutCancel(ctx))
}
