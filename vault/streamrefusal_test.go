package vault

import (
	"net/http"
	"testing"
	"time"

	"github.com/authvault/authvault/internal/testkit/testpki"
	"github.com/authvault/authvault/login"
)

// refusalWait is how long a test waits for an upgrade whose first answer
// is a 401 that stalls: the retry needs a dial and a login, not the
// stalled body.
const refusalWait = 10 * time.Second

// TestStreamStalledRefusalIsNotWaitedFor: the server answers a SPDY
// upgrade with the head of a 401 whose body never comes. The vault retries
// with the next credential at once: it does not read the refused answer,
// whose connection serves no retry, so it adds no wait of its own (client-go
// reads an upgrade's answer with no deadline, and no context).
func TestStreamStalledRefusalIsNotWaitedFor(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newStreamServer(t, ca, nil)
	srv.stall401.Store(true)
	m := newMinter(srv, ca)
	v, cfg := streamVault(t, m.login, login.Backoff(10*time.Millisecond, time.Second))
	srv.revoke(mustSelect(t, v).Info.Token)

	exec := newSPDYExecutor(t, cfg, execTarget(cfg))
	done := make(chan error, 1)
	go func() {
		_, err := runExec(t, exec)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exec error: %v", err)
		}
	case <-time.After(refusalWait):
		srv.close() // ends the stalled answer, and with it the exec
		<-done
		t.Fatalf("exec still waiting after %v: the vault read the stalled 401", refusalWait)
	}
	tokens := m.tokens()
	if hits := srv.seenHits(true); len(hits) != 2 || len(tokens) != 2 || hits[0].Status != http.StatusUnauthorized ||
		hits[1].Auth != bearer(tokens[1]) || hits[1].Status != http.StatusSwitchingProtocols {
		t.Errorf("server saw %+v for tokens %q, want the 401 then the next token's 101", hits, tokens)
	}
}
