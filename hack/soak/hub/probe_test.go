package hub

import (
	"testing"
	"time"
)

// A stall opens at the first slow or failed probe and closes at the next
// good one; one under way is reported, ending now.
func TestProbeRecordsStalls(t *testing.T) {
	var h Hub
	t0 := time.Now()
	h.probe.record(t0, false)
	if got := h.Stalls(); len(got) != 0 {
		t.Fatalf("after a good probe: %d stalls, want 0", len(got))
	}
	h.probe.record(t0.Add(time.Second), true)
	h.probe.record(t0.Add(2*time.Second), true)
	open := h.Stalls()
	if len(open) != 1 || !open[0].Start.Equal(t0.Add(time.Second)) || open[0].End.IsZero() || open[0].Scope != "all" || open[0].Kind != "apiserver-stall" {
		t.Fatalf("during a stall: %+v, want one from the first slow probe, ending now, on all", open)
	}
	h.probe.record(t0.Add(3*time.Second), false)
	h.probe.record(t0.Add(4*time.Second), true)
	h.probe.record(t0.Add(5*time.Second), false)
	if got := h.Stalls(); len(got) != 2 || got[0].Grace < 10*time.Second {
		t.Fatalf("after two stalls: %+v, want two, each with a grace that covers a lost lease", got)
	}
}
