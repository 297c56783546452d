package vault

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// addrsOf returns the connections (client addresses) over which srv
// answered requests authorized by auth, in order.
func addrsOf(srv *apiServer, auth string) []string {
	var addrs []string
	for _, s := range srv.seen() {
		if s.Auth == auth {
			addrs = append(addrs, s.RemoteAddr)
		}
	}
	return addrs
}

// rejected tells whether srv answered a request authorized by auth with 401.
func rejected(srv *apiServer, auth string) bool {
	for _, s := range srv.seen() {
		if s.Auth == auth && s.Status == http.StatusUnauthorized {
			return true
		}
	}
	return false
}

// The API server closes an HTTP/2 connection after every 401. On a
// connection shared by several tokens, one revoked token's 401 would end
// the requests of the others in flight, which net/http retries after a
// backoff of a second and more (docs/benchmarks.md, "The long request").
// Each credential has connections of its own, so the rejection of one
// leaves the others' connection open.
func TestRejectionClosesOnlyTheRejectedCredentialsConnection(t *testing.T) {
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, "")
	srv.closeOn401.Store(true)
	for _, tok := range []string{"token-a", "token-b", "token-c"} {
		srv.allow(tok)
	}
	v := New(Options{})
	defer v.Close()
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "token-a"}), login.ID("a"))
	var logins atomic.Int32
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		tok := "token-b"
		if logins.Add(1) > 1 {
			tok = "token-c"
		}
		return &login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: tok}, nil
	}, login.ID("b-then-c"))

	// Both credentials have the same priority: the vault picks at random.
	for i := 0; !srv.hasServed("token-a") || !srv.hasServed("token-b"); i++ {
		if i == 200 {
			t.Fatal("200 requests did not use both credentials")
		}
		if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
			t.Fatalf("GET = %d, want 200", status)
		}
	}
	before := addrsOf(srv, "Bearer token-a")
	srv.revoke("token-b")
	for i := 0; !rejected(srv, "Bearer token-b") || len(addrsOf(srv, "Bearer token-a")) < len(before)+5; i++ {
		if i == 400 {
			t.Fatal("400 requests after the revocation did not use token-b and token-a")
		}
		if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
			t.Fatalf("GET after the revocation = %d, want 200", status)
		}
	}
	addrs := addrsOf(srv, "Bearer token-a")
	for _, addr := range addrs {
		if addr != before[0] {
			t.Fatalf("token-a's requests used connections %v: token-b's 401 closed token-a's connection", addrs)
		}
	}
}

// A request that brings its own Authorization does not share a
// credential's connection: its 401 does not close that connection.
func TestOwnAuthorizationRejectionLeavesTheCredentialsConnection(t *testing.T) {
	v, srv, _ := tokenVault(t, "token-a")
	srv.closeOn401.Store(true)
	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
		t.Fatalf("GET = %d, want 200", status)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/x", nil)
	req.Header.Set("Authorization", "Bearer not-accepted")
	if status, _ := send(t, v, req); status != 401 {
		t.Fatalf("GET with its own Authorization = %d, want 401", status)
	}
	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
		t.Fatalf("GET = %d, want 200", status)
	}
	if addrs := addrsOf(srv, "Bearer token-a"); len(addrs) != 2 || addrs[0] != addrs[1] {
		t.Fatalf("token-a's requests used connections %v, want one", addrs)
	}
}

// A request that selected a credential just before a 401 invalidated it
// reaches the credential's transport after the pool has retired it and,
// with no connection left (the server closed it after the 401), forgotten
// it. The connection that request opens must not outlive it: the pool no
// longer sweeps that transport, and Close no longer sees it.
func TestLateRequestOnAForgottenTransportLeavesNoConnection(t *testing.T) {
	v, srv, _ := tokenVault(t, "token-a")
	cred := mustSelect(t, v) // selected; not sent yet
	late := cred.route.transport
	t.Cleanup(late.closeIdle) // leave no connection behind for goleak, whatever the outcome
	_ = v.Invalidate(context.Background(), cred, errors.New("rejected by another request"))
	v.pool.sweepRetired() // the token's transport: retired at once, and forgotten, having no connection
	v.pool.mu.Lock()
	forgotten := !slices.Contains(v.pool.retired, late)
	v.pool.mu.Unlock()
	if !forgotten {
		t.Fatal("the token's transport, without a connection, is still among the retired ones")
	}

	req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/x", nil)
	out, rt, _ := v.prepare(req, cred, false)
	resp, err := rt.RoundTrip(out)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	v.Close()
	eventually(t, "the late request's connection to close after Close", func() bool { return late.conns.Load() == 0 })
}
