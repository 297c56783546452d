package addonauth

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// errEnded: a handler hijacked a request the bound had already ended.
var errEnded = errors.New("addonauth: the request has ended: its token expired or was refused, or it reached MaxRequestDuration")

// hijacked takes over conn, which the handler hijacked: the bound closes
// it when it ends, and lasts until it is closed.
func (b *bound) hijacked(conn net.Conn) (net.Conn, error) {
	c := &boundConn{Conn: conn, b: b}
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		_ = conn.Close()
		return nil, errEnded
	}
	b.conn = c
	// The request's context ends when the handler returns: a timer of
	// its own ends the connection.
	if !b.deadline.IsZero() {
		b.expire = time.AfterFunc(b.deadline.Sub(b.a.opts.now()), func() { b.finish(b.reason) })
	}
	b.mu.Unlock()
	if _, ok := conn.(closeWriter); ok {
		return halfClosingConn{c}, nil
	}
	return c, nil
}

// boundWriter is the ResponseWriter the handler gets: a connection it
// hijacks is the bound's to close. It offers Flush and Hijack only where
// the writer it wraps (or one that one unwraps to) does, as
// http.ResponseController would find them, the rest of ResponseController
// through Unwrap, and CloseNotify always.
type boundWriter struct {
	http.ResponseWriter
	b *bound
}

func (w *boundWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// CloseNotify keeps http.CloseNotifier, deprecated but still asserted by
// handlers (gin's Context.Stream panics without it), as the server's own
// writers have it: the channel receives when the request's context ends,
// as it does when the caller leaves.
func (w *boundWriter) CloseNotify() <-chan bool {
	gone := make(chan bool, 1)
	context.AfterFunc(w.b.parent, func() { gone <- true })
	return gone
}

// ReadFrom keeps io.Copy to the response on the server's sendfile path.
func (w *boundWriter) ReadFrom(r io.Reader) (int64, error) { return io.Copy(w.ResponseWriter, r) }

func (w *boundWriter) flush() error { return http.NewResponseController(w.ResponseWriter).Flush() }

func (w *boundWriter) hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return conn, brw, err
	}
	c, err := w.b.hijacked(conn)
	if err != nil {
		return nil, nil, err
	}
	return c, brw, nil
}

type flushWriter struct{ *boundWriter }

func (w flushWriter) Flush()            { _ = w.flush() }
func (w flushWriter) FlushError() error { return w.flush() }

type hijackWriter struct{ *boundWriter }

func (w hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }

type flushHijackWriter struct{ *boundWriter }

func (w flushHijackWriter) Flush()            { _ = w.flush() }
func (w flushHijackWriter) FlushError() error { return w.flush() }
func (w flushHijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.hijack()
}

// wrap is the writer the handler gets in place of w.
func (b *bound) wrap(w http.ResponseWriter) http.ResponseWriter {
	bw := &boundWriter{ResponseWriter: w, b: b}
	flush, hijack := reaches(w, canFlush), reaches(w, canHijack)
	switch {
	case flush && hijack:
		return flushHijackWriter{bw}
	case flush:
		return flushWriter{bw}
	case hijack:
		return hijackWriter{bw}
	}
	return bw
}

// reaches tells whether can holds for w or for a writer it unwraps to:
// where http.ResponseController would find the method.
func reaches(w http.ResponseWriter, can func(http.ResponseWriter) bool) bool {
	for w != nil {
		if can(w) {
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
	return false
}

func canFlush(w http.ResponseWriter) bool {
	switch w.(type) {
	case http.Flusher, interface{ FlushError() error }:
		return true
	}
	return false
}

func canHijack(w http.ResponseWriter) bool {
	_, ok := w.(http.Hijacker)
	return ok
}

// boundConn is a hijacked connection: its Close releases the bound.
type boundConn struct {
	net.Conn
	b *bound

	once sync.Once // the handler and the bound may both close it
	err  error     // of the one Close
}

func (c *boundConn) Close() error {
	c.once.Do(func() { c.err = c.Conn.Close() })
	c.b.finish("")
	return c.err
}

type closeWriter interface{ CloseWrite() error }

// halfClosingConn keeps CloseWrite where the connection has it (TCP,
// TLS): a ReverseProxy passes on its upstream's half-close with it.
type halfClosingConn struct{ *boundConn }

func (c halfClosingConn) CloseWrite() error { return c.Conn.(closeWriter).CloseWrite() }
