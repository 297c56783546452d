package readme

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// demoRun is what the README quotes of docs/demo.json: the figures of the
// run docs/demo.svg draws, written by the demo's --json
// (examples/rotation-demo/report.go names the fields).
type demoRun struct {
	Machine struct {
		CPU        string   `json:"cpu"`
		Cores      int      `json:"cores"`
		GOOS       string   `json:"goos"`
		GOARCH     string   `json:"goarch"`
		LoadBefore *float64 `json:"load_before"`
	} `json:"machine"`
	Workers   int     `json:"workers"`
	Latency   float64 `json:"plugin_latency_s"`
	Seconds   float64 `json:"took_s"`
	Scenarios []struct {
		Name        string     `json:"name"`
		Title       string     `json:"title"`
		TokenLife   float64    `json:"token_life_s"`
		RevokeAfter float64    `json:"revoke_after_s"`
		Outage      float64    `json:"outage_s"`
		Sides       []demoSide `json:"sides"`
	} `json:"scenarios"`
	Operator *struct {
		Reconciled int64 `json:"reconciled"`
		Errors     int64 `json:"errors"`
	} `json:"operator"`
}

type demoSide struct {
	Name         string  `json:"name"`
	Requests     int64   `json:"requests"`
	Unauthorized int64   `json:"unauthorized"`
	Failures     int64   `json:"failures"`
	Waited       int64   `json:"waited"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	Longest      float64 `json:"longest_ms"`
	PluginRuns   int     `json:"plugin_runs"`
	FailedRuns   int     `json:"failed_plugin_runs"`
}

func readDemoRun(t *testing.T) *demoRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "demo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run demoRun
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatalf("docs/demo.json: %v", err)
	}
	if len(run.Scenarios) != 3 {
		t.Fatalf("docs/demo.json has %d scenarios, want the 3 of make demo", len(run.Scenarios))
	}
	for _, sc := range run.Scenarios {
		if len(sc.Sides) != 2 || sc.Sides[0].Name != "authvault" || !strings.HasPrefix(sc.Sides[1].Name, "client-go") {
			t.Fatalf("docs/demo.json: scenario %s has sides %+v, want authvault, then client-go", sc.Name, sc.Sides)
		}
	}
	return &run
}

// machine is the run's machine as the demo prints it (report.go's
// machine.String).
func (r *demoRun) machine() string {
	m := r.Machine
	s := fmt.Sprintf("%d cores", m.Cores)
	if m.CPU != "" {
		s += " (" + m.CPU + ")"
	}
	s += ", " + m.GOOS + "/" + m.GOARCH
	if m.LoadBefore != nil {
		s += fmt.Sprintf(", a load average of %.1f before the demo", *m.LoadBefore)
	}
	return s
}

// demoRows are the README's rows of the figures that make demo
// measures, as they must read for the run of docs/demo.json: authvault
// first, then client-go.
func (r *demoRun) demoRows() []string {
	var rows []string
	for _, sc := range r.Scenarios {
		av, cg := sc.Sides[0], sc.Sides[1]
		switch sc.Name {
		case "revocation":
			rows = append(rows, fmt.Sprintf("| every token revoked %s after its issue (`make demo`) | %s; %s for the new token | %s; %s for the new token |",
				seconds(sc.RevokeAfter), plural(av.Unauthorized, "caller-visible 401"), waited(av.Waited),
				plural(cg.Unauthorized, "caller-visible 401"), waited(cg.Waited)))
		case "expiry":
			rows = append(rows, fmt.Sprintf("| tokens of %s from a plugin that takes %s (`make demo`) | %s for a credential; longest %s | client-go's exec support: %s, the longest %s |",
				seconds(sc.TokenLife), seconds(r.Latency), waited(av.Waited), ms(av.Longest), waited(cg.Waited), ms(cg.Longest)))
		case "outage":
			rows = append(rows, fmt.Sprintf("| the plugin failing for %s (`make demo`) | %s; %s; longest %s | %s; %s, the longest %s |",
				seconds(sc.Outage), plural(av.Unauthorized+av.Failures, "error"), waited(av.Waited), ms(av.Longest),
				plural(cg.Unauthorized+cg.Failures, "error"), waited(cg.Waited), ms(cg.Longest)))
		}
	}
	return rows
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// waited is "no request waited" only where none did.
func waited(n int64) string {
	switch n {
	case 0:
		return "no request waited"
	case 1:
		return "1 request waited"
	}
	return fmt.Sprintf("%d requests waited", n)
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) + " s" }

// ms is a latency as the README writes it: "62 ms", "1.1 s".
func ms(v float64) string {
	if v < 1000 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.1f s", v/1000)
}

// The README's figures of make demo are those of the run docs/demo.svg
// draws, docs/demo.json, and say which machine they came from: before,
// the README said "no request waited" of the revocation scenario, in
// which 17 did on each side, quoted 10 401s where the picture's run had
// 15, and did not say that the figures were one machine's.
func TestREADMEDemoFiguresAreTheRunsItShows(t *testing.T) {
	run := readDemoRun(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	want := map[string]bool{}
	for _, row := range run.demoRows() {
		want[row] = true
		if !strings.Contains(md, row+"\n") {
			t.Errorf("README.md: no row\n%s\n(the run of docs/demo.json)", row)
		}
	}
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "|") && strings.Contains(line, "`make demo`") && !want[line] {
			t.Errorf("README.md:%d: a row of make demo's figures that is not the run of docs/demo.json:\n%s", i+1, line)
		}
	}
	// The caption's story of the revocation scenario.
	rev := run.Scenarios[0]
	if rev.Name != "revocation" {
		t.Fatalf("docs/demo.json: the first scenario is %s, want revocation", rev.Name)
	}
	av, cg := rev.Sides[0], rev.Sides[1]
	holds := av.Waited > 0 && cg.Waited > 0 && av.Unauthorized == 0 && cg.Unauthorized > 0
	prose := strings.Join(strings.Fields(md), " ") // a sentence may wrap anywhere
	if story := "both sides wait for the new token, only client-go's callers get 401s"; strings.Contains(prose, story) != holds {
		t.Errorf("README.md says %q: %v; in docs/demo.json it is %v (waited %d and %d, 401s %d and %d)",
			story, !holds, holds, av.Waited, cg.Waited, av.Unauthorized, cg.Unauthorized)
	}
	if m := run.machine(); !strings.Contains(prose, m) {
		t.Errorf("README.md does not say which machine its figures of make demo came from: %q", m)
	}
	if !strings.Contains(prose, "`make demo` prints your machine's") {
		t.Error("README.md does not say that make demo prints the reader's own figures")
	}
}

// demoMinutes is the README's "make demo … ~N min".
var demoMinutes = regexp.MustCompile(`(?m)^make demo .*~([\d.]+) min`)

// The README's time for make demo is within half a minute of the run's
// (the binary's build aside).
func TestREADMEDemoTime(t *testing.T) {
	run := readDemoRun(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := demoMinutes.FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md: no line \"make demo # … ~N min\"")
	}
	minutes, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	if took := run.Seconds / 60; math.Abs(minutes-took) > 0.5 {
		t.Errorf("README.md: make demo takes ~%v min, the run of docs/demo.json took %.1f min", minutes, took)
	}
}

// docs/benchmarks.md's section on the run the chart shows has the tables
// that run printed, row for row, and its operator's count.
func TestBenchmarksDemoTablesAreTheRunsItShows(t *testing.T) {
	run := readDemoRun(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### The run the chart shows\n")
	if !ok {
		t.Fatal("docs/benchmarks.md: no section \"The run the chart shows\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	prose := strings.Join(strings.Fields(section), " ")
	if m := run.machine(); !strings.Contains(prose, m) {
		t.Errorf("docs/benchmarks.md, the run the chart shows: does not name its machine %q", m)
	}
	for _, sc := range run.Scenarios {
		for _, s := range sc.Sides {
			row := fmt.Sprintf("| %s | %d | %d | %d | %d | %s | %s | %s | %d (%d) |", s.Name, s.Requests, s.Unauthorized, s.Failures,
				s.Waited, round(s.P50), round(s.P99), round(s.Longest), s.PluginRuns, s.FailedRuns)
			if !strings.Contains(section, row+"\n") {
				t.Errorf("docs/benchmarks.md, the run the chart shows, %s: no row\n%s", sc.Name, row)
			}
		}
	}
	if op := run.Operator; op != nil {
		errs := "no error"
		if op.Errors > 0 {
			errs = plural(op.Errors, "error")
		}
		if want := fmt.Sprintf("reconciled %d ConfigMaps with %s", op.Reconciled, errs); !strings.Contains(prose, want) {
			t.Errorf("docs/benchmarks.md, the run the chart shows: does not say the operator %s", want)
		}
	}
}

// round is a latency in milliseconds as the demo's tables print it
// (examples/rotation-demo/table.go).
func round(v float64) string {
	d := time.Duration(math.Round(v * float64(time.Millisecond)))
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(10 * time.Microsecond).String()
}

// The picture is the run's: every line of each panel's title, as the JSON
// has it, is in docs/demo.svg, so that a new run's JSON with an old
// picture fails.
func TestDemoPictureIsTheRunsJSON(t *testing.T) {
	run := readDemoRun(t)
	svg, err := os.ReadFile(filepath.Join(root, "docs", "demo.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range run.Scenarios {
		if sc.Title == "" {
			t.Errorf("docs/demo.json: scenario %s has no title", sc.Name)
		}
		for _, line := range strings.Split(sc.Title, "\n") {
			if !strings.Contains(string(svg), html.EscapeString(line)) {
				t.Errorf("docs/demo.svg does not show %q, the title docs/demo.json gives scenario %s", line, sc.Name)
			}
		}
	}
}
