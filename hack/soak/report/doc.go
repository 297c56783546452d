// Package report reads what a soak run recorded — each side's samples and
// failures, and the faults the harness caused — and says what it shows:
// which failures a fault explains, how the process's resources moved, how
// many logins and log lines it took; it draws the chart and checks the
// bounds the soak promises.
//
// # Attribution
//
// A failure is explained by a fault when it happened between the fault's
// start and its end plus its grace, and its component is within the
// fault's scope: "all" covers everything; "hub" the hub's own callers
// (components hub, watch, exec, operator, addon); "namespace:<namespace>"
// every fleet cluster of that namespace (a fleet names its clusters
// "<namespace>/<name>", whether from a Secret or a ClusterProfile);
// "cluster:<name>" one fleet cluster. A "no-cluster" failure — the fleet did not have the
// cluster — is explained only by a fault on that very cluster: no other
// fault may make a fleet forget a cluster. Anything else is unexplained,
// and one unexplained failure fails the run.
//
// # Resources
//
// For heap in use, goroutines, descriptors, connections and series, a
// side's baseline is each count's median over the Run.Window before
// Run.Settled (the faults' start), its end each count's least over the
// window before Run.End; its slope
// is the least-squares line through the samples of the second half of the
// run, per hour, and as a percentage of that half's mean per hour. Log
// lines, logins and requests are rates over the run.
//
// # Checks
//
// [Summary.Check] gates the sides [Bounds] names: no unexplained failure,
// no leaked secret, no component [Silent] after the faults' graces ([Clear]:
// the run must go on a Run.Window past it), every metric back within
// [Tolerance] of its baseline at the end ([Back], which the harness also
// calls while it waits), and, for a long run, no slope above its bound.
//
// # Output
//
// [Summary.Markdown] is the tables of docs/benchmarks.md; [WriteChart]
// draws the run: the resources of both sides over time, the faults as
// bands, the failures as marks.
package report
