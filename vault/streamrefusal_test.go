package vault

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

// refusalWait is how long a test waits for an upgrade whose first answer
// is a 401 that stalls: the retry needs a dial and a login, not the
// stalled body, which stalls until the test ends it. A hang's bound.
const refusalWait = testwait.Hang

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

// secretForms prints err through every verb a caller may log it with.
func secretForms(err error) []string {
	return []string{err.Error(), fmt.Sprint(err), fmt.Sprintf("%s", err), fmt.Sprintf("%q", err),
		fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)}
}

// TestStreamRefusalEchoingTheTokenRevealsNothing: the server refuses the
// upgrades of two tokens with a 401 whose message quotes the token, as some
// gateways do ("token … is revoked"). The caller's error, which client-go
// makes from that message, says the server's words with each token masked,
// through every fmt verb.
func TestStreamRefusalEchoingTheTokenRevealsNothing(t *testing.T) {
	noGoroutineLeft(t)
	for _, e := range executorCases[:2] {
		t.Run(e.name, func(t *testing.T) {
			ca := testpki.NewCA(t)
			srv := newStreamServer(t, ca, nil)
			srv.echo401.Store(true)
			m := newMinter(srv, ca)
			m.accept.Store(false)
			_, cfg := streamVault(t, m.login, login.Backoff(10*time.Millisecond, time.Second))

			_, err := runExec(t, e.new(t, cfg, execTarget(cfg)))
			if err == nil {
				t.Fatal("exec succeeded with tokens the server rejects")
			}
			if got := srv.upgrades401(); got != 2 {
				t.Fatalf("server answered %d upgrades with 401, want 2", got)
			}
			for _, form := range secretForms(err) {
				for _, tok := range m.tokens() {
					if strings.Contains(form, tok) {
						t.Errorf("error %s reveals token %q", form, tok)
					}
				}
			}
			if !strings.Contains(err.Error(), "token "+redact.Marker+" is revoked") {
				t.Errorf("error %q, want the server's message with the token masked", err)
			}
		})
	}
}
