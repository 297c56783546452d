package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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
	namespace string
	log       logr.Logger

	mu     sync.Mutex                         // guards joined
	joined map[string][]*annotator.Reconciler // by cluster: one for each time it joined
}

func newEngagements(mgr manager.Manager, namespace string, log logr.Logger) *engagements {
	return &engagements{mgr: mgr, namespace: namespace, log: log, joined: map[string][]*annotator.Reconciler{}}
}

// engage is the fleet's OnAdd. It adds m's runnable to the manager and
// returns at once: the runnable waits for the cluster's first login
// itself, and stops when left ends (the cluster has left the fleet) or the
// manager stops.
func (e *engagements) engage(left context.Context, m *fleet.Member) {
	r := &annotator.Reconciler{}
	e.mu.Lock()
	e.joined[m.Name()] = append(e.joined[m.Name()], r)
	e.mu.Unlock()
	log := e.log.WithValues("cluster", m.Name())
	log.Info("cluster joined the fleet: starting its controller")
	err := e.mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		defer context.AfterFunc(left, stop)()
		err := e.run(ctx, m, r)
		switch {
		case left.Err() != nil:
			log.Info("cluster left the fleet: its controller has stopped", "why", context.Cause(left).Error())
		case err != nil:
			// An error returned here would stop the manager and every
			// other cluster's controller with it: one cluster's trouble
			// is logged.
			log.Error(err, "cluster's controller stopped")
		}
		return nil
	}))
	if err != nil {
		log.Error(err, "engaging the cluster")
	}
}

// run starts a cluster.Cluster on the fleet's config for m, and a
// controller that annotates its ConfigMaps, until ctx ends.
func (e *engagements) run(ctx context.Context, m *fleet.Member, r *annotator.Reconciler) error {
	cfg, err := e.restConfig(ctx, m)
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
		Reconciler: r,
		// Every cluster's controller is called annotator, and a cluster
		// that leaves the fleet and comes back (its Secret deleted and
		// created again) gets a new one: controller-runtime remembers
		// every name for the life of the process, stopped controllers'
		// too, and would refuse the second ("controller with name
		// annotator already exists"), leaving the cluster without a
		// controller. A name of its own per cluster would not help (the
		// cluster comes back under its name), and one per engagement
		// would add a set of controller_runtime_* series that stays for
		// good at every join. So one name, not checked: the metrics add
		// up over the fleet, and the logs name the cluster (Logger).
		SkipNameValidation: ptr.To(true),
		Logger:             e.log.WithName("annotator").WithValues("cluster", m.Name()),
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

// restConfig waits for m's config (the same object for as long as the
// cluster is in the fleet). A first login that fails (a Secret with a
// broken kubeconfig, a refused plugin) is tried again until the cluster
// leaves: the fleet refreshes the vault when the Secret is fixed, and this
// cluster's controller must not have given up by then.
func (e *engagements) restConfig(ctx context.Context, m *fleet.Member) (*rest.Config, error) {
	for {
		cfg, err := m.RESTConfig(ctx)
		if err == nil || ctx.Err() != nil || errors.Is(err, fleet.ErrUnknownCluster) || errors.Is(err, fleet.ErrClosed) {
			return cfg, err
		}
		e.log.Error(err, "no credential for the cluster yet", "cluster", m.Name())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
		}
	}
}

// report says what each cluster's controllers did, over every time the
// cluster joined, sorted by cluster.
func (e *engagements) report() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var lines []string
	for name, rs := range e.joined {
		var reconciled, failed int64
		for _, r := range rs {
			reconciled += r.Reconciled.Load()
			failed += r.Failed.Load()
		}
		lines = append(lines, fmt.Sprintf("cluster %s: reconciled %d, failed %d, joined %d time(s)", name, reconciled, failed, len(rs)))
	}
	slices.Sort(lines)
	return lines
}
