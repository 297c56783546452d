package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// After the hub's API server was away for a while (a restart, a CA
// rotation: the soak's issue 34), a profile's change is seen soon after
// the hub is back, not after the informer's backoff, which grows over the
// refused attempts to half a minute or more; the outage is logged at the
// default level, once, and so is its end.
func TestWatchClusterProfilesAfterHubOutage(t *testing.T) {
	s := newSpoke(t)
	p := newTestProvider(t, "test")
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{profilesV1alpha1: "ClusterProfileList"})
	hub := newOutageHub(&client.Fake, client.Tracker(), "clusterprofiles")
	h := &profileHub{client: client, logs: &testlog.Buffer{}}
	h.fleet = New(Options{Logger: h.logs.Logger(0)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- h.fleet.WatchClusterProfiles(ctx, ProfilesOptions{Client: client, Providers: []AccessProvider{p.AccessProvider}})
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
