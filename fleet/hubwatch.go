package fleet

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// hubRetry is how a watch of the hub spaces its attempts while the hub
// cannot be reached: from half a second, doubling, to hubRetryCap.
var hubRetry = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: hubRetryCap}

// hubRetryCap is the longest wait between two attempts to reach the hub:
// once it is back, a watch lists or watches again within this much.
const hubRetryCap = 5 * time.Second

// hubWatch makes an informer's lists and watches of the hub wait out an
// outage themselves, retrying every few seconds, instead of handing each
// failure to the informer's reflector. The reflector backs off on each
// failed attempt, from 0.8 s doubling to 30 s, jittered up to a minute, and
// only forgets after two quiet minutes: after an API server restart or two
// its watch slept through the hub's return, and through the changes the hub
// wrote then (issue 34), without a word at the default level (a refused
// watch never reaches the watch error handler). An answer of the API
// server, an error status included, goes to the reflector as it was.
type hubWatch struct {
	what string      // what is watched, for the log lines
	log  logr.Logger // the outage, once, and its end
	kv   []any       // of the log lines

	mu      sync.Mutex // guards failing
	failing bool
}

// informer is an informer of what lw lists and watches of the hub, for
// objects like example; client is lw's, which says whether the hub serves
// watch lists. Its lists and watches wait out an outage (listWatch), and
// its watch's other failures are logged (watchError).
func (h *hubWatch) informer(lw *cache.ListWatch, client any, example runtime.Object) (cache.SharedIndexInformer, error) {
	informer := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(h.listWatch(lw), client),
		example, cache.SharedIndexInformerOptions{ObjectDescription: h.what})
	if err := informer.SetWatchErrorHandlerWithContext(h.watchError); err != nil {
		return nil, err
	}
	return informer, nil
}

// watchError is the informer's watch error handler. It logs through the
// fleet's logger, not only klog's: a watch that RBAC refuses leaves the
// fleet without its clusters. An expired watch, as after every API server
// restart, only lists again, and says so at V(1).
func (h *hubWatch) watchError(_ context.Context, _ *cache.Reflector, err error) {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		h.log.V(1).Info("the "+h.what+" watch expired; listing again", h.kv...)
		return
	}
	h.log.Error(err, "watching "+h.what+" failed; retrying", h.kv...)
}

// listWatch is lw, retrying while the hub cannot be reached.
func (h *hubWatch) listWatch(lw *cache.ListWatch) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return untilReached(ctx, h, func() (runtime.Object, error) { return lw.ListWithContext(ctx, o) })
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return untilReached(ctx, h, func() (watch.Interface, error) { return lw.WatchWithContext(ctx, o) })
		},
	}
}

// untilReached calls call until it reaches the hub or ctx ends.
func untilReached[T any](ctx context.Context, h *hubWatch, call func() (T, error)) (T, error) {
	b := hubRetry
	for {
		v, err := call()
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			if ctx.Err() == nil {
				h.reached()
			}
			return v, err
		}
		h.failed(err)
		t := time.NewTimer(b.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// unreachable says whether err is a failure to get an answer of the hub's
// API server (refused, reset, TLS, a timeout), rather than its answer.
func unreachable(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status) && !errors.Is(err, context.Canceled)
}

func (h *hubWatch) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		h.failing = true
		h.log.Error(err, "watching "+h.what+" failed; retrying", h.kv...)
	}
}

func (h *hubWatch) reached() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing {
		h.failing = false
		h.log.Info("watching "+h.what+" again", h.kv...)
	}
}
