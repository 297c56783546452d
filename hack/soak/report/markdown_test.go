package report

import (
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// markdownRun is an hour with faults, failures and a leak on client-go's
// side.
func markdownRun() *Run {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := leakOn(wire.RoleClientGo, flatRun(time.Hour, nil))
	r.Faults = []Fault{
		{Kind: "revocation", Scope: "hub", Start: at(600), End: at(630), Grace: 10 * time.Second},
		{Kind: "revocation", Scope: "cluster:c3", Start: at(900), End: at(915)},
		{Kind: "apiserver-restart", Scope: "all", Start: at(1200), End: at(1220)},
	}
	r.Sides[wire.RoleAuthvault].Failures = []wire.Failure{
		{At: at(1210), Component: "watch", Kind: "refused", Message: "connection refused"},
	}
	r.Sides[wire.RoleClientGo].Failures = []wire.Failure{
		{At: at(610), Component: "hub", Kind: "unauthorized", Message: "Unauthorized"},
		{At: at(905), Component: "fleet", Cluster: "c3", Kind: "unauthorized", Message: "Unauthorized"},
		{At: at(1500), Component: "fleet", Cluster: "c9", Kind: "tls", Message: "x509: certificate signed by unknown authority"},
	}
	return r
}

func TestMarkdown(t *testing.T) {
	md := Summarize(markdownRun()).Markdown()
	for _, want := range []string{
		"Run of 1h0m0s: settled after 6m0s, faults until 45m0s, 50 fleet clusters.",
		"| component | kind | authvault: explained (by) | authvault: unexplained | client-go: explained (by) | client-go: unexplained |",
		"| fleet | tls | 0 | 0 | 0 | 1 |",
		"| fleet | unauthorized | 0 | 0 | 1 (revocation 1) | 0 |",
		"| watch | refused | 1 (apiserver-restart 1) | 0 | 0 | 0 |",
		"client-go: 1 unexplained, the first:",
		"- at 25m0s: fleet c9, tls: x509: certificate signed by unknown authority",
		// Goroutines: client-go's grow by 2 a sample from 400; baseline
		// at 6 min (i = 72), 1440 an hour over a second-half mean of
		// 400+2×540.
		"| goroutines | authvault | 400 | 400 | 400 | 400 | +0.00 | +0.00 |",
		"| goroutines | client-go | 540 | 544 | 1840 | 1832 | +1440.00 | +97.30 |",
		"| heap in use (MiB) | authvault | 64.0 | 64.0 | 64.0 | 64.0 | +0.00 | +0.00 |",
		"| series | client-go | 900 | 900 | 900 | 900 | +0.00 | +0.00 |",
		"| log lines per hour per cluster | 42.4 | 42.4 |",
		"| logins per hour | 720.0 | 40.0 |",
		"| logins per hour the tokens' lives predict | 20.0 | 20.0 |",
		"| logins / predicted | 36.00 | 2.00 |",
		"| requests per second | 20.0 | 20.0 |",
		"| leaked secrets | 0 | 0 |",
		"| apiserver-restart | 1 | 20s |",
		"| revocation | 2 | 45s |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown has no %q:\n%s", want, md)
		}
	}
	// Every table row has as many cells as its header.
	var cells int
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			cells = 0
			continue
		}
		n := strings.Count(line, "|")
		if cells == 0 {
			cells = n
		} else if n != cells {
			t.Errorf("row %q has %d bars, its header %d", line, n, cells)
		}
	}
}

func TestMarkdownQuietRun(t *testing.T) {
	md := Summarize(flatRun(2*time.Minute, nil)).Markdown()
	for _, want := range []string{"None on any side.", "#### Faults\n\nNone."} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown has no %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "unexplained, the first") {
		t.Errorf("Markdown lists unexplained failures of a quiet run:\n%s", md)
	}
}
