package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/authvault/authvault/examples/operator/annotator"
	"github.com/authvault/authvault/fleet"
)

// engagements run a cluster.Cluster and an annotator controller for every
// cluster of the fleet, each as a runnable of the manager, from when the
// cluster joins until it leaves or the manager stops.
type engagements struct {
	mgr       manager.Manager
	fleet     *fleet.Fleet
	namespace string

	mu      sync.Mutex // guards leave and results
	leave   map[string]context.CancelFunc
	results map[string]*annotator.Reconciler
}

func newEngagements(mgr manager.Manager, f *fleet.Fleet, namespace string) *engagements {
	return &engagements{mgr: mgr, fleet: f, namespace: namespace, leave: map[string]context.CancelFunc{}, results: map[string]*annotator.Reconciler{}}
}

// engage adds name's runnable to the manager. It returns at once: the
// runnable waits for the cluster's first login itself.
func (e *engagements) engage(name string) {
	left, leave := context.WithCancel(context.Background())
	r := &annotator.Reconciler{}
	e.mu.Lock()
	e.leave[name] = leave
	e.results[name] = r
	e.mu.Unlock()
	err := e.mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		context.AfterFunc(left, stop)
		// An error returned here would stop the manager and every other
		// cluster's controller with it: one cluster's trouble is logged.
		if err := e.run(ctx, name, r); err != nil {
			ctrl.Log.WithName("fleet-example").Error(err, "cluster's controller stopped", "cluster", name)
		}
		return nil
	}))
	if err != nil {
		ctrl.Log.WithName("fleet-example").Error(err, "engaging the cluster", "cluster", name)
	}
}

// disengage stops name's cache and controller; the fleet closes its vault
// right after.
func (e *engagements) disengage(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if leave := e.leave[name]; leave != nil {
		leave()
	}
	delete(e.leave, name)
}

// run starts a cluster.Cluster on the fleet's config for name, and a
// controller that annotates its ConfigMaps, until ctx ends.
func (e *engagements) run(ctx context.Context, name string, r *annotator.Reconciler) error {
	cfg, err := e.restConfig(ctx, name)
	if err != nil {
		return err
	}
	cl, err := cluster.New(cfg, func(o *cluster.Options) {
		o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{e.namespace: {}}}
	})
	if err != nil {
		return err
	}
	r.Client = cl.GetClient()
	c, err := controller.NewUnmanaged("annotator", controller.Options{
		Reconciler:         r,
		SkipNameValidation: ptr.To(true), // one per cluster, and a cluster may come back
		Logger:             ctrl.Log.WithName("annotator").WithValues("cluster", name),
	})
	if err != nil {
		return err
	}
	if err := c.Watch(source.Kind(cl.GetCache(), &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{})); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- cl.Start(ctx) })
	wg.Go(func() { errs <- c.Start(ctx) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// restConfig waits for name's config (the same object for as long as the
// cluster is in the fleet). A first login that fails (a Secret with a
// broken kubeconfig, a refused plugin) is tried again until the cluster
// leaves: the fleet refreshes the vault when the Secret is fixed, and this
// cluster's controller must not have given up by then.
func (e *engagements) restConfig(ctx context.Context, name string) (*rest.Config, error) {
	for {
		cfg, err := e.fleet.RESTConfig(ctx, name)
		if err == nil || ctx.Err() != nil || errors.Is(err, fleet.ErrUnknownCluster) || errors.Is(err, fleet.ErrClosed) {
			return cfg, err
		}
		ctrl.Log.WithName("fleet-example").Error(err, "no credential for the cluster yet", "cluster", name)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
		}
	}
}

// report says what each cluster's controller did, sorted by cluster.
func (e *engagements) report() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var lines []string
	for name, r := range e.results {
		lines = append(lines, fmt.Sprintf("cluster %s: reconciled %d, failed %d", name, r.Reconciled.Load(), r.Failed.Load()))
	}
	slices.Sort(lines)
	return lines
}
