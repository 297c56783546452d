package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress shows how a scenario goes while it runs, a line per side in
// the tables' words: on a terminal, rewritten in place every second;
// otherwise (a log, a pipe) every few seconds, so that the log reads line
// by line.
type progress struct {
	out      io.Writer
	terminal bool
	width    int // the terminal's; a longer line would wrap and break the rewrite

	drawn int // lines on the terminal that the next report rewrites; only start's goroutine and stop touch it
}

func newProgress(out *os.File) *progress {
	p := &progress{out: out, terminal: term.IsTerminal(int(out.Fd()))}
	if p.terminal {
		p.width, _, _ = term.GetSize(int(out.Fd()))
	}
	return p
}

// start reports every tick until the returned stop is called; stop ends
// the report.
func (p *progress) start(sc *scenario, origin time.Time, sides []*side) (stop func()) {
	every := time.Second
	if !p.terminal {
		every = 5 * time.Second
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.line(sc, time.Since(origin), sides)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		p.clear() // the table replaces the lines
	}
}

// line reports how sc goes at elapsed.
func (p *progress) line(sc *scenario, elapsed time.Duration, sides []*side) {
	p.report(lines(sc, elapsed, sides))
}

// report writes lines: on a terminal over the previous report's.
func (p *progress) report(lines []string) {
	if !p.terminal {
		fmt.Fprint(p.out, strings.Join(lines, "\n")+"\n")
		return
	}
	var b strings.Builder
	p.up(&b)
	for i, line := range lines {
		if p.width > 0 && len(line) >= p.width {
			line = line[:p.width-1]
		}
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("\r\033[K" + line)
	}
	p.drawn = len(lines)
	fmt.Fprint(p.out, b.String())
}

// clear erases the last report from the terminal, leaving the cursor
// where it began.
func (p *progress) clear() {
	if !p.terminal || p.drawn == 0 {
		return
	}
	var b strings.Builder
	p.up(&b)
	b.WriteString("\r\033[J") // erase to the end of the screen
	p.drawn = 0
	fmt.Fprint(p.out, b.String())
}

// up moves the cursor to the first line of the last report.
func (p *progress) up(b *strings.Builder) {
	if p.drawn > 1 {
		fmt.Fprintf(b, "\033[%dA", p.drawn-1)
	}
}

// lines are the report at elapsed: a line per side with what its table
// will count, 401s apart from other errors.
func lines(sc *scenario, elapsed time.Duration, sides []*side) []string {
	lead := fmt.Sprintf("  %s %3ds", sc.name, int(elapsed.Seconds()))
	var out []string
	for i, s := range sides {
		if i > 0 {
			lead = strings.Repeat(" ", len(lead))
		}
		c := &s.counters
		runs, failed := 0, 0
		for _, r := range s.endpoint.Runs() {
			runs++
			if !r.ok {
				failed++
			}
		}
		out = append(out, fmt.Sprintf("%s  %-9s %s, %s, %s, %d waited, %s (%d failed)", lead, short(s.name),
			count(c.requests.Load(), "request"), count(c.unauthorized.Load(), "401"), count(c.other.Load(), "other error"),
			c.slow.Load(), count(int64(runs), "plugin run"), failed))
	}
	return out
}

// count is n noun, plural unless n is 1.
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// short is a side's name in the progress line.
func short(name string) string {
	name, _, _ = strings.Cut(name, " ")
	return name
}
