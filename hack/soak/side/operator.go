package side

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/authvault/authvault/examples/operator/annotator"
)

// operator is examples/operator's annotator in a controller-runtime
// manager with leader election, on the side's namespace, started again
// whenever its manager stops.
type operator struct {
	rec *recorder
	log logr.Logger
	cfg *rest.Config
	ns  string

	reconciled atomic.Int64
}

// leaderElectionID is the operator's lease, in the side's namespace.
const leaderElectionID = "soak-operator"

// run runs a manager until ctx ends; a manager that stops before then (its
// leader election lost) is a failure, and a new one starts.
func (o *operator) run(ctx context.Context) {
	for ctx.Err() == nil {
		elected, err := o.start(ctx)
		if err != nil && ctx.Err() == nil {
			kind := classify(err)
			if kind == kindOther && elected {
				// controller-runtime's "leader election lost" has no
				// type of its own: a manager that led, and stopped with
				// no error of a request, lost its lease.
				kind = kindLeaderLost
			}
			o.rec.fail(compOperator, "", kind, err)
		}
		sleep(ctx, retryPause)
	}
}

// start runs one manager until it stops, and says whether it led.
func (o *operator) start(ctx context.Context) (elected bool, err error) {
	mgr, err := ctrl.NewManager(o.cfg, ctrl.Options{
		LeaderElection:                true,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       o.ns,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cache.Options{DefaultNamespaces: map[string]cache.Config{o.ns: {}}},
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		// Its controller comes again with every manager the run starts.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:     o.log,
	})
	if err != nil {
		return false, fmt.Errorf("soak: the operator's manager: %w", err)
	}
	r := &annotator.Reconciler{Client: mgr.GetClient()}
	// The annotator's own SetupWithManager, with o.reconcile in between.
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("annotator").
		Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			res, err := r.Reconcile(ctx, req)
			switch {
			case err == nil:
				o.reconciled.Add(1)
			case ctx.Err() == nil:
				o.rec.fail(compOperator, "", "", err)
			}
			return res, err
		}))
	if err != nil {
		return false, fmt.Errorf("soak: the operator's controller: %w", err)
	}
	err = mgr.Start(ctx)
	select {
	case <-mgr.Elected():
		elected = true
	default:
	}
	return elected, err
}
