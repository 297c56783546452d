package side

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// The workload's pace: a soak, not a stress test.
const (
	// opPause is the pause between two operations of a CRUD worker.
	opPause = 200 * time.Millisecond
	// opTimeout bounds one operation: one that takes longer failed
	// ("timeout"), as a caller with a deadline sees it.
	opTimeout = 30 * time.Second
	// watchTimeout is how long the API server keeps a watch before it ends
	// it, and the workload starts another.
	watchTimeout = 5 * time.Minute
	// retryPause is the pause after an operation that failed before the
	// next, so that an outage is not a busy loop.
	retryPause = time.Second
)

// workload is what the side's callers do with the hub.
type workload struct {
	rec *recorder
	cs  kubernetes.Interface
	ns  string
}

// crud creates, updates, lists and deletes ConfigMaps of the side's
// namespace until ctx ends, as worker id.
func (w *workload) crud(ctx context.Context, id int) {
	cms := w.cs.CoreV1().ConfigMaps(w.ns)
	for n := 0; ctx.Err() == nil; n++ {
		name := fmt.Sprintf("soak-%d-%d", id, n)
		created := w.op(ctx, func(ctx context.Context) error {
			_, err := cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Data:       map[string]string{"step": "created"},
			}, metav1.CreateOptions{})
			return err
		})
		if !created {
			continue
		}
		// A merge patch, not an update: the operator annotates the
		// ConfigMap meanwhile, and an update would meet a conflict.
		w.op(ctx, func(ctx context.Context) error {
			_, err := cms.Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"step":"updated"}}`), metav1.PatchOptions{})
			return err
		})
		w.op(ctx, func(ctx context.Context) error {
			_, err := cms.List(ctx, metav1.ListOptions{Limit: 20})
			return err
		})
		w.op(ctx, func(ctx context.Context) error {
			return cms.Delete(ctx, name, metav1.DeleteOptions{})
		})
	}
}

// op runs one CRUD operation and pauses after it; it says whether the
// operation succeeded.
func (w *workload) op(ctx context.Context, do func(context.Context) error) bool {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	err := do(octx)
	cancel()
	if err != nil {
		w.rec.fail(compHub, "", "", err)
		sleep(ctx, retryPause)
		return false
	}
	w.rec.succeed(compHub)
	sleep(ctx, opPause)
	return true
}

// watch keeps a watch on the side's ConfigMaps until ctx ends, starting
// another whenever one ends; a watch that cannot start, or that ends with
// an error, is a failure.
func (w *workload) watch(ctx context.Context) {
	cms := w.cs.CoreV1().ConfigMaps(w.ns)
	for ctx.Err() == nil {
		started := time.Now()
		// The stream lives on the request's context: opTimeout bounds
		// its start only.
		wctx, cancel := context.WithCancel(ctx)
		startTimer := time.AfterFunc(opTimeout, cancel)
		timeout := int64(watchTimeout / time.Second)
		wi, err := cms.Watch(wctx, metav1.ListOptions{TimeoutSeconds: &timeout})
		if fired := !startTimer.Stop(); err != nil {
			kind := ""
			if fired {
				kind = kindTimeout
			}
			w.rec.fail(compWatch, "", kind, err)
			cancel()
			sleep(ctx, retryPause)
			continue
		}
		w.rec.succeed(compWatch)
		err = drain(ctx, wi)
		cancel()
		if err != nil {
			w.rec.fail(compWatch, "", "", err)
		}
		if time.Since(started) < retryPause {
			sleep(ctx, retryPause)
		}
	}
}

// drain reads the watch's events until it ends, or ctx does; it returns
// the error an Error event brought.
func drain(ctx context.Context, wi watch.Interface) error {
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return nil
			}
			if ev.Type == watch.Error {
				return apierrors.FromObject(ev.Object)
			}
		}
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// jitter is a random duration in [0, d).
func jitter(d time.Duration) time.Duration { return rand.N(d) }
