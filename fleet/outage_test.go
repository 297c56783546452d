package fleet

import (
	"net"
	"os"
	"sync"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
)

// outageHub is a fake hub's resource that can go away as a restarted API
// server does: its watches end, its lists and watches are refused for a
// number of attempts, and once it is back its first watch answers 410
// (the restarted server's watch cache does not reach back to the watch's
// resource version), so that the informer lists again.
type outageHub struct {
	tracker clienttesting.ObjectTracker

	mu       sync.Mutex // guards what follows
	watches  []watch.Interface
	refusals int           // attempts left to refuse; 0: the hub serves
	expired  bool          // the next watch answers 410
	back     chan struct{} // closed at the last refusal
	watching chan struct{} // closed at the first watch
	began    bool
}

// newOutageHub makes fake's lists and watches of resource go through an
// outageHub; its watches go to tracker, as fake's own reactor does.
func newOutageHub(fake *clienttesting.Fake, tracker clienttesting.ObjectTracker, resource string) *outageHub {
	h := &outageHub{tracker: tracker, watching: make(chan struct{})}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	fake.PrependReactor("list", resource, func(clienttesting.Action) (bool, runtime.Object, error) {
		if h.refuse() {
			return true, nil, refused
		}
		return false, nil, nil
	})
	fake.PrependWatchReactor(resource, func(a clienttesting.Action) (bool, watch.Interface, error) {
		if h.refuse() {
			return true, nil, refused
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.expired {
			h.expired = false
			return true, nil, apierrors.NewResourceExpired("too old resource version: 1 (2)")
		}
		w, err := h.tracker.Watch(a.GetResource(), a.GetNamespace())
		if err == nil {
			h.watches = append(h.watches, w)
			if !h.began {
				h.began = true
				close(h.watching)
			}
		}
		return true, w, err
	})
	return h
}

// refuse says whether this attempt is refused, and counts it.
func (h *outageHub) refuse() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refusals == 0 {
		return false
	}
	h.refusals--
	if h.refusals == 0 {
		h.expired = true
		close(h.back)
	}
	return true
}

// down ends the open watches and refuses the next n lists and watches;
// the channel is closed when the hub is back.
func (h *outageHub) down(n int) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refusals, h.back = n, make(chan struct{})
	for _, w := range h.watches {
		w.Stop()
	}
	h.watches = nil
	return h.back
}
