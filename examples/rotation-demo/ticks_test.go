package main

import (
	"math"
	"slices"
	"testing"
)

// TestSecondTicks: whole seconds with their unit, at most maxSecondTicks
// of them, on a step a reader counts in.
func TestSecondTicks(t *testing.T) {
	for _, tc := range []struct {
		hi   float64
		want []string
	}{
		{5, []string{"0 s", "1 s", "2 s", "3 s", "4 s", "5 s"}},
		{24.3, []string{"0 s", "5 s", "10 s", "15 s", "20 s"}},
		{52, []string{"0 s", "10 s", "20 s", "30 s", "40 s", "50 s"}},
		{75.5, []string{"0 s", "10 s", "20 s", "30 s", "40 s", "50 s", "60 s", "70 s"}},
		{130, []string{"0 s", "15 s", "30 s", "45 s", "60 s", "75 s", "90 s", "105 s", "120 s"}},
		{600, []string{"0 s", "100 s", "200 s", "300 s", "400 s", "500 s", "600 s"}},
	} {
		var got []string
		for _, tick := range (secondTicks{labels: true}).Ticks(0, tc.hi) {
			if !tick.IsMinor() {
				got = append(got, tick.Label)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ticks of 0 to %v s = %q, want %q", tc.hi, got, tc.want)
		}
	}
}

// TestLatencyTicks: the latency axis's powers of ten, in the unit that
// reads best.
func TestLatencyTicks(t *testing.T) {
	var got []string
	for _, tick := range (latencyTicks{}).Ticks(math.Log10(yMin), math.Log10(yMax)) {
		if !tick.IsMinor() {
			got = append(got, tick.Label)
		}
	}
	if want := []string{"1 ms", "10 ms", "100 ms", "1 s", "10 s"}; !slices.Equal(got, want) {
		t.Errorf("latency ticks = %q, want %q", got, want)
	}
}
