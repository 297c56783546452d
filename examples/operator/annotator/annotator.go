// Package annotator is the small operator of the examples and the demo: it
// marks every ConfigMap it sees with an annotation, through a
// controller-runtime manager, so that each ConfigMap costs a watch event, a
// cache read and a patch through the vault.
package annotator

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Annotation is what the operator sets on every ConfigMap.
const Annotation = "authvault.example/seen"

// Reconciler annotates ConfigMaps and counts how that went.
type Reconciler struct {
	Client             client.Client
	Reconciled, Failed atomic.Int64
}

// Reconcile annotates the ConfigMap req names, unless it already is.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	err := r.Client.Get(ctx, req.NamespacedName, &cm)
	if err == nil && cm.Annotations[Annotation] == "" {
		patch := client.MergeFrom(cm.DeepCopy())
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[Annotation] = "yes"
		err = r.Client.Patch(ctx, &cm, patch)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		r.Failed.Add(1)
		return ctrl.Result{}, err
	}
	r.Reconciled.Add(1)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler for ConfigMaps.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("annotator").Complete(r)
}
