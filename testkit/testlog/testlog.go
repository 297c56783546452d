// Package testlog is a logr sink for tests that read what a vault logged
// from its goroutines, and a writer for what a logger or a process writes
// while the test reads.
package testlog

import (
	"bytes"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Buffer collects log lines; it is safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex // guards buf
	buf strings.Builder
}

// Logger logs into b, at verbosity up to v.
func (b *Buffer) Logger(v int) logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.buf.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: v})
}

// String is everything logged so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Writer is an io.Writer that a test reads while goroutines, a logger or a
// child process still write to it; it is safe for concurrent use.
type Writer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// String is everything written so far.
func (w *Writer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
