package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/authvault/authvault/testkit/testwait"
)

// freeAddr is a local address nothing listens on (for the moment).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// bufferLog is a logger that writes into a buffer, safe for concurrent use.
func bufferLog() (logr.Logger, func() string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		buf.WriteString(prefix + args + "\n")
	}, funcr.Options{})
	return log, func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

// serving runs serveAll in the background; its result comes on the channel.
func serving(ctx context.Context, log logr.Logger, srv, ops *http.Server, grace time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() { done <- serveAll(ctx, log, srv, false, ops, grace) }()
	return done
}

func ended(t *testing.T, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("the servers still run %v after they should have stopped", within)
		return nil
	}
}

// The ops server failing to listen stops the callers' server too, and
// its error is the sidecar's.
func TestServersStopWhenOneFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	log, _ := bufferLog()
	srv := newServer(freeAddr(t), http.NotFoundHandler())
	ops := &http.Server{Addr: taken.Addr().String(), Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}

	err = ended(t, serving(context.Background(), log, srv, ops, time.Minute), testwait.Hang)
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("serveAll = %v, want the ops server's %v", err, syscall.EADDRINUSE)
	}
	if conn, err := net.Dial("tcp", srv.Addr); err == nil {
		conn.Close()
		t.Errorf("the callers' server still accepts connections after the ops server failed")
	}
}

// A signal (ctx ends) stops both servers without an error: requests under
// way have the grace to finish, and a stream that outlasts it is closed.
func TestServersShutDownWithinTheGrace(t *testing.T) {
	const grace = 200 * time.Millisecond
	log, logs := bufferLog()
	streaming := make(chan struct{})
	srv := newServer(freeAddr(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(streaming)
		<-r.Context().Done() // a watch: it never ends by itself
	}))
	ops := &http.Server{Addr: freeAddr(t), Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := serving(ctx, log, srv, ops, grace)

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	waitFor(t, "both servers to listen", func() bool {
		for _, addr := range []string{srv.Addr, ops.Addr} {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				return false
			}
			conn.Close()
		}
		return true
	})
	resp, err := client.Get("http://" + srv.Addr + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-streaming

	stop()
	if err := ended(t, done, grace+testwait.Hang); err != nil {
		t.Errorf("serveAll after a signal = %v, want nil", err)
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(testwait.Hang):
		t.Errorf("the stream is still open %v after the shutdown", testwait.Hang)
		resp.Body.Close()
		<-closed
	}
	for _, addr := range []string{srv.Addr, ops.Addr} {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after the shutdown", addr)
		}
	}
	if got := logs(); !strings.Contains(got, "grace over") {
		t.Errorf("logs = %q, want the grace's end", got)
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, cond)
}
