package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// progressSides are two sides partway through a scenario: the vault's
// with no error and a run that failed, client-go's with 401s and other
// errors.
func progressSides() []*side {
	av := &side{name: "authvault", endpoint: &endpoint{}}
	av.counters.requests.Store(1200)
	av.counters.slow.Store(1)
	av.endpoint.record(pluginRun{ok: true})
	av.endpoint.record(pluginRun{})
	cg := &side{name: "client-go exec plugin", endpoint: &endpoint{}}
	cg.counters.requests.Store(1100)
	cg.counters.unauthorized.Store(13)
	cg.counters.other.Store(5)
	cg.counters.slow.Store(15)
	cg.endpoint.record(pluginRun{ok: true})
	return []*side{av, cg}
}

// TestProgressTells401sFromOtherErrors: the progress lines count what
// the tables count, in their words: 401s apart from other errors.
func TestProgressTells401sFromOtherErrors(t *testing.T) {
	var out strings.Builder
	p := &progress{out: &out}
	p.line(&scenario{name: "outage"}, 12*time.Second, progressSides())
	got := out.String()
	for _, want := range []string{
		"authvault 1200 requests, 0 401s, 0 other errors, 1 waited, 2 plugin runs (1 failed)",
		"client-go 1100 requests, 13 401s, 5 other errors, 15 waited, 1 plugin run (0 failed)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("progress:\n%s\nwant a line with %q", got, want)
		}
	}
	if regexp.MustCompile(`\berr\b`).MatchString(got) {
		t.Errorf("progress:\n%s\nsays \"err\": the tables tell 401s from other errors", got)
	}
	if lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n"); len(lines) != 2 {
		t.Errorf("progress:\n%s\nwant a line per side", got)
	}
}

// TestProgressRewritesItsLinesOnATerminal: on a terminal each report
// goes back over the previous one's lines, cut to the terminal's width,
// and stop erases them.
func TestProgressRewritesItsLinesOnATerminal(t *testing.T) {
	var out strings.Builder
	p := &progress{out: &out, terminal: true, width: 60}
	sc, sides := &scenario{name: "outage"}, progressSides()
	p.line(sc, time.Second, sides)
	first := out.String()
	out.Reset()
	p.line(sc, 2*time.Second, sides)
	second := out.String()
	out.Reset()
	p.clear()
	cleared := out.String()

	if strings.Contains(first, "\033[1A") {
		t.Errorf("first report %q moves up over lines it did not write", first)
	}
	if !strings.HasPrefix(second, "\033[1A\r") {
		t.Errorf("second report %q, want it to start by going back up to the first line", second)
	}
	for _, line := range strings.Split(second, "\n") {
		text := line[strings.LastIndex(line, "\033[K")+len("\033[K"):]
		if len(text) >= p.width {
			t.Errorf("line %q is %d characters, want fewer than the terminal's %d", text, len(text), p.width)
		}
	}
	if cleared != "\033[1A\r\033[J" {
		t.Errorf("stop writes %q, want it to go back up and erase both lines", cleared)
	}
}
