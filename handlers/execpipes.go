package handlers

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// errStdoutHeldOpen says that a process the plugin left behind, out of its
// process group, held its stdout open after it exited.
var errStdoutHeldOpen = errors.New("handlers: exec plugin's stdout held open after it exited")

// outputPipes carries the plugin's output through pipes of its own rather
// than exec.Cmd's: Wait then returns as soon as the plugin exits, not when
// the last process holding its output does, and the copying ends at a
// deadline of the caller's choosing. Use: add, Start the command, start,
// Wait for it, finish; close in any case.
type outputPipes struct {
	// Set by add, before start.
	readers []*os.File  // the read ends, closed by close
	writers []*os.File  // the plugin's ends, closed once it started
	dsts    []io.Writer // where each reader's bytes go

	wg sync.WaitGroup // the copying goroutines, one per reader

	// Written by the stdout copy, read after wg.Wait.
	heldOpen bool // the copy of stdout (the first reader) ended at the deadline
}

// add makes a pipe whose bytes go to dst and returns the plugin's end.
func (p *outputPipes) add(dst io.Writer) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.readers, p.writers, p.dsts = append(p.readers, r), append(p.writers, w), append(p.dsts, dst)
	return w, nil
}

// start closes this process's copies of the plugin's ends, so that a
// reader sees EOF once every process holding one is gone, and starts
// copying.
func (p *outputPipes) start() {
	for _, w := range p.writers {
		w.Close()
	}
	p.writers = nil
	for i, r := range p.readers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_, err := io.Copy(&keepDraining{w: p.dsts[i]}, r)
			if i == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				p.heldOpen = true
			}
		}()
	}
}

// finish waits for the copies to end, at the latest delay from now or when
// ctx ends.
func (p *outputPipes) finish(ctx context.Context, delay time.Duration) {
	readers := p.readers // expire may run after close
	expire := func(at time.Time) {
		for _, r := range readers {
			if r.SetReadDeadline(at) != nil {
				r.Close() // not pollable: closing ends the read
			}
		}
	}
	expire(time.Now().Add(delay))
	stop := context.AfterFunc(ctx, func() { expire(time.Now()) })
	p.wg.Wait()
	stop()
}

// close closes every pipe end left open.
func (p *outputPipes) close() {
	for _, f := range append(p.readers, p.writers...) {
		f.Close()
	}
	p.readers, p.writers = nil, nil
}

// keepDraining writes to w until w fails, then discards: a failing
// destination must not leave the plugin blocked on a full pipe.
type keepDraining struct {
	w      io.Writer
	failed bool
}

func (d *keepDraining) Write(p []byte) (int, error) {
	if !d.failed {
		if _, err := d.w.Write(p); err != nil {
			d.failed = true
		}
	}
	return len(p), nil
}
