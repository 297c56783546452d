package report

import "github.com/authvault/authvault/hack/soak/wire"

// Metric is one of a side's resources that a sample measures.
type Metric int

// The metrics, in the order the tables and the chart show them.
const (
	HeapInUse  Metric = iota // bytes
	Goroutines               // goroutines
	FDs                      // open file descriptors
	Conns                    // established TCP connections
	Series                   // Prometheus series
)

// metrics is every Metric, in order.
var metrics = []Metric{HeapInUse, Goroutines, FDs, Conns, Series}

// String is the metric's name in tables and errors.
func (m Metric) String() string {
	switch m {
	case HeapInUse:
		return "heap in use"
	case Goroutines:
		return "goroutines"
	case FDs:
		return "file descriptors"
	case Conns:
		return "connections"
	case Series:
		return "series"
	}
	return "unknown metric"
}

// of is the metric's value in s.
func (m Metric) of(s wire.Sample) float64 {
	switch m {
	case HeapInUse:
		return float64(s.HeapInUse)
	case Goroutines:
		return float64(s.Goroutines)
	case FDs:
		return float64(s.FDs)
	case Conns:
		return float64(s.Conns)
	case Series:
		return float64(s.Series)
	}
	return 0
}
