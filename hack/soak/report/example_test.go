package report_test

import (
	"fmt"

	"github.com/authvault/authvault/hack/soak/report"
	"github.com/authvault/authvault/hack/soak/wire"
)

// The harness waits, once the faults stop, until a side's counts are back
// near what they were when the run settled.
func ExampleBack() {
	baseline := wire.Sample{Goroutines: 412, FDs: 63, Conns: 18}
	fmt.Println(report.Back(baseline, wire.Sample{Goroutines: 430, FDs: 61, Conns: 22}, report.Tolerance{}))
	fmt.Println(report.Back(baseline, wire.Sample{Goroutines: 530, FDs: 64, Conns: 31}, report.Tolerance{}))
	// Output:
	// <nil>
	// report: not back to the baseline: goroutines 530, above 453 (baseline 412 + max(10 %, 5)); connections 31, above 23 (baseline 18 + max(10 %, 5))
}
