// Package testlog is a logr sink for tests that read what a vault logged
// from its goroutines.
package testlog

import (
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
