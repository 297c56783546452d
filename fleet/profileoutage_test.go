package fleet

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// outageHub is a fake hub's ClusterProfiles that can go away as a
// restarted API server does: its watches end, its lists and watches are
// refused for a number of attempts, and once it is back its first watch
// answers 410 (the restarted server's watch cache does not reach back to
// the watch's resource version), so that the informer lists again.
type outageHub struct {
	client *dynamicfake.FakeDynamicClient

	mu       sync.Mutex
	watches  []watch.Interface
	refusals int           // attempts left to refuse; 0: the hub serves
	expired  bool          // the next watch answers 410
	back     chan struct{} // closed at the last refusal
	watching chan struct{} // closed at the first watch
	began    bool
}

func newOutageHub() *outageHub {
	h := &outageHub{watching: make(chan struct{})}
	h.client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{profilesV1alpha1: "ClusterProfileList"})
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	h.client.PrependReactor("list", "clusterprofiles", func(clienttesting.Action) (bool, runtime.Object, error) {
		if h.refuse() {
			return true, nil, refused
		}
		return false, nil, nil
	})
	h.client.PrependWatchReactor("clusterprofiles", func(a clienttesting.Action) (bool, watch.Interface, error) {
		if h.refuse() {
			return true, nil, refused
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.expired {
			h.expired = false
			return true, nil, apierrors.NewResourceExpired("too old resource version: 1 (2)")
		}
		w, err := h.client.Tracker().Watch(a.GetResource(), a.GetNamespace())
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

// After the hub's API server was away for a while (a restart, a CA
// rotation: the soak's issue 34), a profile's change is seen soon after
// the hub is back, not after the informer's backoff, which grows over the
// refused attempts to half a minute or more; the outage is logged at the
// default level, once, and so is its end.
func TestWatchClusterProfilesAfterHubOutage(t *testing.T) {
	s := newSpoke(t)
	p := newTestProvider(t, "test")
	hub := newOutageHub()
	h := &profileHub{client: hub.client, logs: &testlog.Buffer{}}
	h.fleet = New(Options{Logger: h.logs.Logger(0)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- h.fleet.WatchClusterProfiles(ctx, ProfilesOptions{Client: hub.client, Providers: []AccessProvider{p.AccessProvider}})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		h.fleet.Close()
	})
	select {
	case <-hub.watching:
	case <-time.After(testwait.Hang):
		t.Fatal("no watch began")
	}
	h.put(t, profile("inv", "east", "test", s.cluster()))
	eventually(t, "the cluster is added", func() bool { return h.fleet.Vault("inv/east") != nil })

	// Six refused attempts: client-go's reflector waits 0.8 s after the
	// first, doubling, so 25.6 s at least after the sixth.
	back := hub.down(6)
	select {
	case <-back:
	case <-time.After(2 * time.Minute):
		t.Fatal("the watch did not try six times in two minutes")
	}
	changed := s.cluster()
	changed["tls-server-name"] = "example.com" // httptest's certificate names it
	h.put(t, profile("inv", "east", "test", changed))
	// Seen within 15 s of the hub's return: the watch retries the hub
	// every few seconds at most while it is away.
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(h.logs.String(), "its cluster data changed") {
		if time.Now().After(deadline) {
			t.Fatalf("the profile's change was not seen within 15 s of the hub's return; log:\n%s", h.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "watching ClusterProfiles failed"); n != 1 {
		t.Errorf("the outage is logged %d times, want once; log:\n%s", n, logs)
	}
	if !strings.Contains(logs, "watching ClusterProfiles again") {
		t.Errorf("the outage's end is not logged; log:\n%s", logs)
	}
}
