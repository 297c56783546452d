package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/authvault/authvault/examples/operator/annotator"
)

// operator is the annotator of examples/operator in a controller-runtime
// manager with leader election, run through a scenario's vault, with an
// admin creating ConfigMaps for it to reconcile.
type operator struct {
	admin      kubernetes.Interface
	reconciler annotator.Reconciler

	// failed counts reconcile errors but those of a reconcile that the
	// manager's stop cut short (the annotator's own Failed counts those too).
	failed atomic.Int64
	mu     sync.Mutex // guards first
	first  error      // the first error failed counts, for the report
}

// reconcile is the annotator's Reconcile, counting its errors.
func (o *operator) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := o.reconciler.Reconcile(ctx, req)
	if err != nil && ctx.Err() == nil {
		o.failed.Add(1)
		o.mu.Lock()
		if o.first == nil {
			o.first = err
		}
		o.mu.Unlock()
	}
	return res, err
}

// firstError is the first reconcile error, if any.
func (o *operator) firstError() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.first
}

// start runs the operator on cfg, in a namespace of its own where the admin
// creates a ConfigMap five times a second. stop ends both and returns once
// the manager has stopped (its informers, leader election and event
// recorder), so that the vault under cfg can be closed afterwards without
// any of them meeting a closed vault.
func (o *operator) start(ctx context.Context, cfg *rest.Config) (stop func(), err error) {
	ns, err := o.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "operator-"}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	namespace := ns.Name
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection: true, LeaderElectionID: "rotation-demo", LeaderElectionNamespace: namespace,
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
		Logger:  logr.Discard(),
	})
	if err != nil {
		return nil, err
	}
	o.reconciler.Client = mgr.GetClient()
	// The annotator's own SetupWithManager, with o.reconcile in between.
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("annotator").Complete(reconcile.Func(o.reconcile))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "\noperator:", err)
		}
	})
	wg.Go(func() { // the work the operator is there for
		for i := 0; ctx.Err() == nil; i++ {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("work-%d", i)}}
			_, _ = o.admin.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
			sleep(ctx, 200*time.Millisecond)
		}
	})
	return func() { cancel(); wg.Wait() }, nil
}
