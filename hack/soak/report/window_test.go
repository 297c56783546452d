package report

import (
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// A request in flight at a sample (a goroutine and a connection more)
// neither sets the baseline nor keeps a side from coming back; what it
// keeps for good does.
func TestWindows(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	at := func(s int, g, c int) wire.Sample {
		return wire.Sample{At: t0.Add(time.Duration(s) * time.Second), Goroutines: g, Conns: c}
	}
	quiet := []wire.Sample{at(0, 100, 50), at(5, 160, 80), at(10, 101, 50), at(15, 99, 51), at(20, 100, 50)}
	b, ok := BaselineOf(quiet, t0, t0.Add(20*time.Second))
	if !ok || b.Goroutines != 100 || b.Conns != 50 {
		t.Errorf("BaselineOf = %d goroutines, %d conns (ok %v), want the medians 100, 50", b.Goroutines, b.Conns, ok)
	}
	f, ok := FloorOf(quiet, t0, t0.Add(20*time.Second))
	if !ok || f.Goroutines != 99 || f.Conns != 50 {
		t.Errorf("FloorOf = %d goroutines, %d conns (ok %v), want the least, 99, 50", f.Goroutines, f.Conns, ok)
	}
	leaked := []wire.Sample{at(0, 300, 50), at(5, 360, 80), at(10, 301, 50), at(15, 299, 51), at(20, 300, 50)}
	if f, _ := FloorOf(leaked, t0, t0.Add(20*time.Second)); Back(b, f, Tolerance{}) == nil {
		t.Errorf("a floor of %d goroutines counts as back to a baseline of %d", f.Goroutines, b.Goroutines)
	}
	if f, _ := FloorOf(quiet, t0, t0.Add(20*time.Second)); Back(b, f, Tolerance{}) != nil {
		t.Errorf("the quiet run's floor is not back: %v", Back(b, f, Tolerance{}))
	}
	if _, ok := BaselineOf(quiet, t0.Add(time.Hour), t0.Add(2*time.Hour)); ok {
		t.Error("BaselineOf a window with no sample: ok")
	}
	if _, ok := FloorOf(nil, t0, t0.Add(time.Hour)); ok {
		t.Error("FloorOf no samples: ok")
	}
}
