package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/testkit/testlog"
)

// lineCount counts the lines of logs that hold every one of parts.
func lineCount(logs *testlog.Buffer, parts ...string) int {
	n := 0
	for line := range strings.SplitSeq(logs.String(), "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// The fleet's lifecycle lines, as funcr prints them.
func joinedLine(cluster, source string) []string {
	return []string{`"level"=0 "msg"="cluster joined the fleet"`, `"cluster"="` + cluster + `"`, `"source"="` + source + `"`}
}

func leftLine(cluster, reason string) []string {
	return []string{`"level"=0 "msg"="cluster left the fleet"`, `"cluster"="` + cluster + `"`, reason}
}

func changedLine(cluster string, parts ...string) []string {
	return append([]string{`"level"=0 "msg"="cluster's source changed"`, `"cluster"="` + cluster + `"`}, parts...)
}

// wantCause checks that ctx, a context OnAdd got, has ended, and that its
// cause says why.
func wantCause(t *testing.T, ctx context.Context, target error, why string) {
	t.Helper()
	cause := context.Cause(ctx)
	if ctx.Err() == nil || !errors.Is(cause, target) || !strings.Contains(cause.Error(), why) {
		t.Errorf("OnAdd's context: Err %v, cause %v; want it ended, its cause a %v that says %q", ctx.Err(), cause, target, why)
	}
}

// Issue 32, item 8: the fleet says at INFO, once each, when a cluster of a
// Secret joins, changes source and leaves, and why it left; a rewrite that
// changes nothing says nothing; the context OnAdd got ends with that
// reason as its cause. No content of a Secret reaches the log.
func TestFleetLogsTheLifeOfASecretsCluster(t *testing.T) {
	ctx := ctxFor(t)
	h := newHubLogging(t, 0, SecretsOptions{})
	api := newAPIServer(t)
	kc := func() map[string][]byte { return map[string][]byte{"value": api.kubeconfig()} }
	const wl1 = "capi/wl1"

	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), kc())
	eventually(t, "capi/wl1 to join", func() bool { return lineCount(h.logs, joinedLine(wl1, "Secret capi/wl1-kubeconfig")...) == 1 })

	// Its kubeconfig changes: one line. Written again unchanged (as a
	// relist sends it), or with another label: nothing.
	api.rotate()
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), kc())
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), kc())
	h.put("capi", "wl1-kubeconfig", map[string]string{ClusterNameLabel: "wl1", "team": "blue"}, kc())
	h.barrier()
	if n := lineCount(h.logs, changedLine(wl1, `"source"="Secret capi/wl1-kubeconfig"`, `"change"="its kubeconfig changed`)...); n != 1 {
		t.Errorf("the change of the kubeconfig was logged %d times, want once:\n%s", n, h.logs)
	}
	if n := lineCount(h.logs, `"cluster"="capi/wl1"`); n != 2 {
		t.Errorf("capi/wl1 has %d lines after a join and a change, want 2:\n%s", n, h.logs)
	}

	// Unlabelled: it leaves the selection.
	first := h.addedCtx(wl1, 1)
	h.put("capi", "wl1-kubeconfig", nil, kc())
	eventually(t, "capi/wl1 to leave", func() bool { return lineCount(h.logs, `"msg"="cluster left the fleet"`, `"cluster"="capi/wl1"`) == 1 })
	const unselected = "its Secret capi/wl1-kubeconfig no longer matches the label selector cluster.x-k8s.io/cluster-name"
	if lineCount(h.logs, leftLine(wl1, unselected)...) != 1 {
		t.Errorf("the leave does not say %q:\n%s", unselected, h.logs)
	}
	wantCause(t, first, ErrUnknownCluster, unselected)

	// Labelled again it joins again; its label emptied, it is refused.
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), kc())
	eventually(t, "capi/wl1 to join again", func() bool { return lineCount(h.logs, joinedLine(wl1, "Secret capi/wl1-kubeconfig")...) == 2 })
	second := h.addedCtx(wl1, 2)
	h.put("capi", "wl1-kubeconfig", capiLabels(""), kc())
	const refused = "refused: its Secret capi/wl1-kubeconfig has an empty cluster-name label"
	eventually(t, "capi/wl1 to be refused", func() bool { return lineCount(h.logs, leftLine(wl1, refused)...) == 1 })
	wantCause(t, second, ErrUnknownCluster, refused)

	// Back, then deleted.
	h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), kc())
	eventually(t, "capi/wl1 to join a third time", func() bool { return lineCount(h.logs, joinedLine(wl1, "Secret capi/wl1-kubeconfig")...) == 3 })
	third := h.addedCtx(wl1, 3)
	if err := h.client.CoreV1().Secrets("capi").Delete(ctx, "wl1-kubeconfig", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const deleted = "its Secret capi/wl1-kubeconfig was deleted"
	eventually(t, "capi/wl1 to leave for good", func() bool { return lineCount(h.logs, leftLine(wl1, deleted)...) == 1 })
	wantCause(t, third, ErrUnknownCluster, deleted)

	// A Secret that claims the cluster more strongly takes over: one line
	// that says so, not a leave and a join.
	const wl2 = "capi/wl2"
	owned := kubeconfigSecret("capi", "wl2-custom", "wl2", api, clusterOwner("cluster.x-k8s.io/v1beta2", "Cluster", "wl2", true))
	if _, err := h.client.CoreV1().Secrets("capi").Create(ctx, owned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "capi/wl2 to join", func() bool { return lineCount(h.logs, joinedLine(wl2, "Secret capi/wl2-custom")...) == 1 })
	byOwned := h.addedCtx(wl2, 1)
	h.put("capi", "wl2-kubeconfig", capiLabels("wl2"), kc())
	const outranked = "Secret capi/wl2-kubeconfig outranks Secret capi/wl2-custom"
	eventually(t, "capi/wl2 to change source", func() bool {
		return lineCount(h.logs, changedLine(wl2, `"source"="Secret capi/wl2-kubeconfig"`, `"previous"="Secret capi/wl2-custom"`, outranked)...) == 1
	})
	if n := lineCount(h.logs, `"cluster"="capi/wl2"`); n != 2 {
		t.Errorf("capi/wl2 has %d lines after a join and a change of source, want 2:\n%s", n, h.logs)
	}
	wantCause(t, byOwned, ErrUnknownCluster, "its source changed: "+outranked)

	// Removed by hand.
	byNamed := h.addedCtx(wl2, 2)
	h.fleet.Remove(wl2)
	const byHand = "removed with Fleet.Remove"
	if n := lineCount(h.logs, leftLine(wl2, byHand)...); n != 1 {
		t.Errorf("Remove was logged %d times, want once:\n%s", n, h.logs)
	}
	wantCause(t, byNamed, ErrUnknownCluster, byHand)

	for _, tok := range api.tokens {
		if strings.Contains(h.logs.String(), tok) {
			t.Errorf("a token of a kubeconfig reached the log")
		}
	}
}

// A Secret that claims a cluster it does not serve, or collides with one,
// is logged once; one that two Secrets claim alike leaves the fleet saying
// so.
func TestFleetLogsWhyASecretIsRefused(t *testing.T) {
	ctx := ctxFor(t)
	h := newHubLogging(t, 0, SecretsOptions{})
	a, b := newAPIServer(t), newAPIServer(t)
	owner := clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl1", true)
	if _, err := h.client.CoreV1().Secrets("capi").Create(ctx, kubeconfigSecret("capi", "wl1-a", "wl1", a, owner), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "capi/wl1 to join", func() bool { return lineCount(h.logs, joinedLine("capi/wl1", "Secret capi/wl1-a")...) == 1 })
	joined := h.addedCtx("capi/wl1", 1)
	if _, err := h.client.CoreV1().Secrets("capi").Create(ctx, kubeconfigSecret("capi", "wl1-b", "wl1", b, owner), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const tie = "refused: Secrets [capi/wl1-a capi/wl1-b] all claim it"
	eventually(t, "capi/wl1 to leave", func() bool { return lineCount(h.logs, leftLine("capi/wl1", tie)...) == 1 })
	wantCause(t, joined, ErrUnknownCluster, tie)

	// Owned by another Cluster: skipped, once, saying why.
	other := kubeconfigSecret("capi", "wl3-other", "wl3", a, clusterOwner("cluster.x-k8s.io/v1beta1", "Cluster", "wl4", true))
	for range 3 {
		h.put("capi", other.Name, other.Labels, other.Data)
	}
	h.barrier()
	if n := lineCount(h.logs, `"secret"="capi/wl3-other"`, "is neither wl3-kubeconfig nor controlled by Cluster wl3"); n != 1 {
		t.Errorf("the skipped Secret was logged %d times with why, want once:\n%s", n, h.logs)
	}
}

// A cluster added by hand says it joined, and every cluster says it left
// when the fleet closes; OnAdd's context ends with ErrClosed.
func TestFleetLogsAddAndClose(t *testing.T) {
	var logs testlog.Buffer
	var ctxs []context.Context
	f := New(Options{Logger: logs.Logger(0), OnAdd: func(ctx context.Context, _ *Member) { ctxs = append(ctxs, ctx) }})
	api := newAPIServer(t)
	for _, name := range []string{"a", "b"} {
		if err := f.Add(name, api.login); err != nil {
			t.Fatal(err)
		}
		if n := lineCount(&logs, joinedLine(name, "Fleet.Add")...); n != 1 {
			t.Errorf("Add(%q) logged %d joins, want one:\n%s", name, n, &logs)
		}
	}
	f.Close()
	f.Close()
	for i, name := range []string{"a", "b"} {
		if n := lineCount(&logs, leftLine(name, "the fleet was closed")...); n != 1 {
			t.Errorf("%s left %d times at Close, want once:\n%s", name, n, &logs)
		}
		wantCause(t, ctxs[i], ErrClosed, "closed")
	}
}

// The same for a ClusterProfile's cluster: it joins, its access changes,
// it is refused when it offers no provider of the file, it is deleted.
func TestFleetLogsTheLifeOfAProfilesCluster(t *testing.T) {
	s := newSpoke(t)
	p := newTestProvider(t, "test")
	h := newProfileHubLogging(t, 0, ProfilesOptions{Providers: []AccessProvider{p.AccessProvider}})
	const east, source = "inv/east", `ClusterProfile inv/east, access provider \"test\"`

	h.put(t, profile("inv", "east", "test", s.cluster()))
	eventually(t, "inv/east to join", func() bool { return lineCount(h.logs, joinedLine(east, source)...) == 1 })
	first := h.addedCtx(t, east, 1)
	h.put(t, profile("inv", "east", "test", s.cluster(ExtraEnvExtension, map[string]any{"PROFILE_VAR": "v2"})))
	h.put(t, profile("inv", "east", "test", s.cluster(ExtraEnvExtension, map[string]any{"PROFILE_VAR": "v2"})))
	eventually(t, "the change", func() bool {
		return lineCount(h.logs, changedLine(east, `"source"="`+source+`"`, "its cluster data changed")...) == 1
	})

	h.put(t, profile("inv", "east", "other", s.cluster()))
	const refused = "refused: ClusterProfile inv/east: none of its access providers is in the provider file"
	eventually(t, "inv/east to be refused", func() bool { return lineCount(h.logs, leftLine(east, refused)...) == 1 })
	wantCause(t, first, ErrUnknownCluster, refused)

	h.put(t, profile("inv", "east", "test", s.cluster()))
	eventually(t, "inv/east to join again", func() bool { return lineCount(h.logs, joinedLine(east, source)...) == 2 })
	second := h.addedCtx(t, east, 2)
	if err := h.client.Resource(profilesV1alpha1).Namespace("inv").Delete(context.Background(), "east", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const deleted = "its ClusterProfile inv/east was deleted"
	eventually(t, "inv/east to leave", func() bool { return lineCount(h.logs, leftLine(east, deleted)...) == 1 })
	wantCause(t, second, ErrUnknownCluster, deleted)
	if n := lineCount(h.logs, `"cluster"="inv/east"`); n != 5 {
		t.Errorf("inv/east has %d lines, want 5 (joined, changed, left, joined, left):\n%s", n, h.logs)
	}
}
