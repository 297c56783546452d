package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// report is the run's figures in JSON (--json): what the README quotes is
// checked against the file of the run its picture shows (docs/demo.json,
// by internal/readme), so the field names are a contract with that test.
type report struct {
	Machine   machine          `json:"machine"`
	Workers   int              `json:"workers"`          // per side
	Latency   float64          `json:"plugin_latency_s"` // of every plugin run
	Seconds   float64          `json:"took_s"`           // the whole run, the API server's start included
	Scenarios []scenarioReport `json:"scenarios"`
	Operator  *operatorReport  `json:"operator,omitempty"` // when the revocation scenario ran
}

// machine is what the figures depend on: they are one run's, and a loaded
// or smaller machine stretches every latency.
type machine struct {
	CPU    string `json:"cpu,omitempty"` // the model, where the OS says (Linux)
	Cores  int    `json:"cores"`
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	Go     string `json:"go"`
	// The 1-minute load average before the demo started, that is the
	// machine's other work (Linux; absent elsewhere).
	LoadBefore *float64 `json:"load_before,omitempty"`
}

type scenarioReport struct {
	Name  string  `json:"name"`
	Title string  `json:"title"` // the panel's two lines: what is done, and the claim
	Run   float64 `json:"run_s"`
	// What the issuer does; zero when it does not.
	TokenLife   float64 `json:"token_life_s,omitempty"`
	RevokeAfter float64 `json:"revoke_after_s,omitempty"`
	Outage      float64 `json:"outage_s,omitempty"`
	// The 1-minute load average at the scenario's end, the demo's own
	// load included (Linux; absent elsewhere).
	Load  *float64     `json:"load,omitempty"`
	Sides []sideReport `json:"sides"` // authvault first, then client-go
}

type sideReport struct {
	Name         string  `json:"name"`
	Requests     int64   `json:"requests"`
	Unauthorized int64   `json:"unauthorized"` // 401s a caller got
	Failures     int64   `json:"failures"`     // any other error a caller got
	Waited       int64   `json:"waited"`       // requests that spent more than slowCredential getting a credential
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	Longest      float64 `json:"longest_ms"`
	PluginRuns   int     `json:"plugin_runs"`
	FailedRuns   int     `json:"failed_plugin_runs"`
}

type operatorReport struct {
	Reconciled int64 `json:"reconciled"`
	Errors     int64 `json:"errors"`
}

// String is the machine in one line, for the demo's output.
func (m machine) String() string {
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

func newMachine() machine {
	return machine{CPU: cpuModel(), Cores: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		Go: runtime.Version(), LoadBefore: loadAverage()}
}

func scenarioFigures(r *result, load *float64) scenarioReport {
	sc := r.scenario
	sr := scenarioReport{Name: sc.name, Title: panelTitle(r), Run: sc.run.Seconds(), TokenLife: sc.ttl.Seconds(),
		RevokeAfter: sc.revokeAfter.Seconds(), Outage: sc.outage.Seconds(), Load: load}
	for _, s := range r.sides {
		f := s.figures
		sr.Sides = append(sr.Sides, sideReport{Name: s.name, Requests: f.requests, Unauthorized: f.unauthorized, Failures: f.other,
			Waited: f.slow, P50: ms(f.p50), P99: ms(f.p99), Longest: ms(f.longest), PluginRuns: f.runs, FailedRuns: f.failedRuns})
	}
	return sr
}

// ms is d in milliseconds, to the nanosecond: a figure rounded first
// could round the other way from the tables' (7.2746 ms prints 7.27ms,
// 7.275 ms 7.28ms).
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func writeReport(path string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// loadAverage is the 1-minute load average, or nil where /proc/loadavg
// does not say.
func loadAverage() *float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return nil
	}
	l, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return nil
	}
	return &l
}

// cpuModel is the processor's name from /proc/cpuinfo, or "" where there
// is none.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if key, value, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return ""
}
