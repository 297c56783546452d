package rotation

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Call wraps one request of a cycle: it returns the context to send it
// with, and what to do with its error once it returns.
type Call func(ctx context.Context, op string) (context.Context, func(error))

// Cycle is one round of the workload on cms: create the ConfigMap name,
// update it, list, and delete it, each request wrapped by call. A failed
// create ends the round.
func Cycle(ctx context.Context, cms corev1client.ConfigMapInterface, name string, call Call) {
	rctx, done := call(ctx, "create")
	cm, err := cms.Create(rctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"step": "created"},
	}, metav1.CreateOptions{})
	done(err)
	if err != nil {
		return
	}
	cm.Data["step"] = "updated"
	rctx, done = call(ctx, "update")
	_, err = cms.Update(rctx, cm, metav1.UpdateOptions{})
	done(err)
	rctx, done = call(ctx, "list")
	_, err = cms.List(rctx, metav1.ListOptions{Limit: 20})
	done(err)
	rctx, done = call(ctx, "delete")
	done(cms.Delete(rctx, name, metav1.DeleteOptions{}))
}
