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

// progress shows how a scenario goes while it runs: on a terminal, one line
// rewritten in place every second; otherwise (a log, a pipe) one line every
// few seconds, so that the log reads line by line.
type progress struct {
	out      io.Writer
	terminal bool
	width    int // the terminal's; a longer line would wrap and break \r
}

func newProgress(out *os.File) *progress {
	p := &progress{out: out, terminal: term.IsTerminal(int(out.Fd()))}
	if p.terminal {
		p.width, _, _ = term.GetSize(int(out.Fd()))
	}
	return p
}

// start reports every tick until the returned stop is called; stop ends
// the line.
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
		if p.terminal {
			fmt.Fprint(p.out, "\r\033[K") // the table replaces the line
		}
	}
}

func (p *progress) line(sc *scenario, elapsed time.Duration, sides []*side) {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s %3ds:", sc.name, int(elapsed.Seconds()))
	for i, s := range sides {
		if i > 0 {
			b.WriteString(" |")
		}
		c := &s.counters
		fmt.Fprintf(&b, " %s %d req, %d err, %d waited, %d runs", short(s.name), c.requests.Load(),
			c.unauthorized.Load()+c.other.Load(), c.slow.Load(), len(s.endpoint.Runs()))
	}
	line := b.String()
	if p.terminal {
		if p.width > 0 && len(line) >= p.width {
			line = line[:p.width-1]
		}
		line = "\r\033[K" + line
	} else {
		line += "\n"
	}
	fmt.Fprint(p.out, line)
}

// short is a side's name in the progress line.
func short(name string) string {
	name, _, _ = strings.Cut(name, " ")
	return name
}
