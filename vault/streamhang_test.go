package vault

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testpki"
)

// silentServer accepts TLS connections and reads what comes, never
// answering: an upgrade sent to it waits for an answer that never comes.
type silentServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func newSilentServer(t *testing.T, ca *testpki.CA) *silentServer {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", ca.ServerTLS(t, "api", nil))
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_, _ = c.Read(make([]byte, 64<<10)) // the handshake, then the request; until close
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *silentServer) URL() string { return "https://" + s.ln.Addr().String() }

// TestStreamUnansweredUpgradeEndsAtTheDeadline: a WebSocket exec to a
// server that takes the connection and never answers the upgrade ends at
// the caller's deadline (gorilla sets it on the connection), with no
// goroutine left, and the credential kept: no answer is no rejection. The
// vault adds no wait of its own. (client-go's SPDY round tripper reads the
// answer with neither deadline nor context: it waits until the server
// answers or closes, with or without the vault, which cannot reach its
// connection.)
func TestStreamUnansweredUpgradeEndsAtTheDeadline(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newSilentServer(t, ca)
	v, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "silent-secret"}))
	cred := mustSelect(t, v)
	exec := newWebSocketExecutor(t, cfg, execTarget(cfg))

	const deadline = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &testlog.Writer{}}) }()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("exec error = %v, want the deadline's", err)
		}
		noSecretIn(t, err, "silent-secret")
	case <-time.After(deadline + 10*time.Second): // slack for a shared machine
		t.Fatalf("exec still waiting 10s after its deadline of %v", deadline)
	}
	if got := mustSelect(t, v); got != cred {
		t.Errorf("credential %v was replaced: an unanswered upgrade invalidated it", cred)
	}
}
