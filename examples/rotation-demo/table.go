package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// figures are what one side of a scenario comes to.
type figures struct {
	requests, unauthorized, other int64
	slow                          int64 // requests that waited more than slowCredential for a credential
	p50, p99, longest             time.Duration
	runs, failedRuns              int
}

func summarize(samples []sample, runs []pluginRun) figures {
	var f figures
	took := make([]time.Duration, 0, len(samples))
	for _, s := range samples {
		f.requests++
		switch s.err {
		case unauthorized:
			f.unauthorized++
		case otherError:
			f.other++
		}
		if s.wait > slowCredential {
			f.slow++
		}
		took = append(took, s.took)
	}
	slices.Sort(took)
	if n := len(took); n > 0 {
		f.p50, f.p99, f.longest = took[n/2], took[n*99/100], took[n-1]
	}
	for _, r := range runs {
		f.runs++
		if !r.ok {
			f.failedRuns++
		}
	}
	return f
}

// table is a scenario's pair of rows as a Markdown table.
func table(scenario string, sides []*side) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | requests | caller-visible 401s | other errors | waited >%v for a credential | p50 | p99 | longest stall | plugin runs (failed) |\n",
		scenario, slowCredential)
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range sides {
		f := s.figures
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s | %d (%d) |\n", s.name, f.requests, f.unauthorized, f.other,
			f.slow, round(f.p50), round(f.p99), round(f.longest), f.runs, f.failedRuns)
	}
	return b.String()
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(10 * time.Microsecond).String()
}

// closing sums the run up, a line per scenario, client-go first: what the
// vault spares its callers.
func closing(results []*result) string {
	var b strings.Builder
	b.WriteString("In short, per scenario: caller-visible errors, requests that waited for a credential, the longest request.\n")
	for _, r := range results {
		fmt.Fprintf(&b, "  %-10s", r.scenario.name)
		for i := len(r.sides) - 1; i >= 0; i-- {
			f := r.sides[i].figures
			fmt.Fprintf(&b, "  %s: %d errors, %d waited, %s", short(r.sides[i].name), f.unauthorized+f.other, f.slow, round(f.longest))
			if i > 0 {
				b.WriteString(";")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// wrap breaks s into lines of at most width characters, at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		if i > 0 && n+1+len(word) > width {
			b.WriteString("\n")
			n = 0
		} else if i > 0 {
			b.WriteString(" ")
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
