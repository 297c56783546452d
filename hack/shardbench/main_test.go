package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs a replica when the bench starts this test binary as one.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-replica" {
		os.Exit(command(os.Args[1:], os.Stdout))
	}
	goleak.VerifyTestMain(m)
}

// The bench, small and fast (30 clusters, a 4 s LeaseDuration), runs every
// phase against the embedded API server with replica processes: so that
// make bench-shards keeps working. What it checks here is what no machine's
// speed changes (no two owners, only the lost replica's clusters moved,
// logins to owned clusters only); how long each took is the bench's to
// report, on a quiet machine.
func TestBenchRunsEveryPhase(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run make test, or export KUBEBUILDER_ASSETS=$(hack/envtest.sh)")
	}
	res, err := bench(benchFlags{clusters: 30, small: 10, window: 3 * time.Second, dir: t.TempDir(),
		shards: replicaFlags{connect: true, leaseDuration: 4 * time.Second, renewDeadline: 2 * time.Second, retryPeriod: 500 * time.Millisecond}})
	if res != nil {
		var out bytes.Buffer
		res.print(&out)
		t.Log(out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.overlaps) > 0 {
		t.Errorf("two owners at once: %v", res.overlaps)
	}
	for what, m := range map[string]moves{"the kill": res.kill, "the cut": res.cut} {
		if m.strays > 0 || m.moved == 0 {
			t.Errorf("%s moved %d clusters, %d of replicas that stayed", what, m.moved, m.strays)
		}
	}
	if n := res.join.to["r3"]; n == 0 || n != res.join.moved {
		t.Errorf("the join moved %d clusters, %d to the joiner", res.join.moved, n)
	}
	for id, st := range res.replicas {
		if st.Logins > st.Owned {
			t.Errorf("replica %s logged in %d times, owning %d clusters", id, st.Logins, st.Owned)
		}
	}
	if st := res.single["single"]; st.Owned != 30 || st.Logins != 30 {
		t.Errorf("the unsharded process owned %d clusters and logged in %d times, want 30 and 30", st.Owned, st.Logins)
	}
}
