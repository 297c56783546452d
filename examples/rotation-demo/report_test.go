package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportIsTheTables: the JSON holds each side's figures as the table
// prints them, its latencies rounding as the table's do (internal/readme
// checks docs/benchmarks.md's tables against docs/demo.json this way),
// under the names that test reads.
func TestReportIsTheTables(t *testing.T) {
	results := fakeResults()
	// Latencies that a figure rounded to the microsecond first would
	// print otherwise: 7.2746 ms is 7.27ms, 7.275 ms 7.28ms.
	results[0].sides[0].figures.p50 = 7274600 * time.Nanosecond
	rep := &report{Machine: newMachine(), Workers: 8, Latency: 1}
	for _, r := range results {
		rep.Scenarios = append(rep.Scenarios, scenarioFigures(r, nil))
	}
	path := filepath.Join(t.TempDir(), "demo.json")
	if err := writeReport(path, rep); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"machine"`, `"cores"`, `"goos"`, `"goarch"`, `"took_s"`, `"plugin_latency_s"`,
		`"unauthorized"`, `"failures"`, `"waited"`, `"p50_ms"`, `"p99_ms"`, `"longest_ms"`, `"plugin_runs"`, `"failed_plugin_runs"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("the JSON has no %s", key)
		}
	}
	var back report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		want := table(r.scenario.name, r.sides)
		for j, s := range back.Scenarios[i].Sides {
			dur := func(ms float64) time.Duration { return time.Duration(math.Round(ms * float64(time.Millisecond))) }
			row := fmt.Sprintf("| %s | %d | %d | %d | %d | %s | %s | %s | %d (%d) |\n", s.Name, s.Requests, s.Unauthorized, s.Failures,
				s.Waited, round(dur(s.P50)), round(dur(s.P99)), round(dur(s.Longest)), s.PluginRuns, s.FailedRuns)
			if !strings.Contains(want, row) {
				t.Errorf("%s, side %d: from the JSON\n%swant a row of\n%s", r.scenario.name, j, row, want)
			}
		}
	}
}
