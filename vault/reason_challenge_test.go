package vault

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testpki"
)

// challengeServer answers 401 with challenge(auth) to every request
// authorized with reject, and 200 to the others.
func challengeServer(t *testing.T, ca *testpki.CA, reject string, challenge func(auth string) string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth := r.Header.Get("Authorization"); auth == reject {
			w.Header().Set("WWW-Authenticate", challenge(auth))
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	srv.TLS = ca.ServerTLS(t, "api", nil)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// twoTokens is a handler that gives first, then second on every later call.
func twoTokens(server string, ca []byte, first, second string) login.Handler {
	var calls atomic.Int32
	return func(context.Context) (*login.ConnectionInfo, error) {
		tok := second
		if calls.Add(1) == 1 {
			tok = first
		}
		return &login.ConnectionInfo{Server: server, CAData: ca, Token: tok}, nil
	}
}

// A WWW-Authenticate header past 4 KiB (a server or a proxy may send
// megabytes) is left out of the Reason and of the log line of the login it
// causes; the status code stays.
func TestHugeChallengeIsLeftOutOfTheReason(t *testing.T) {
	ca := testpki.NewCA(t)
	huge := "Bearer realm=\"" + strings.Repeat("x", maxChallenge) + "\""
	srv := challengeServer(t, ca, "Bearer first-token", func(string) string { return huge })
	var logs testlog.Buffer
	var r reasons
	v := New(Options{NoFallback: true, Logger: logs.Logger(1)})
	defer v.Close()
	v.OnLogin(r.wrap(twoTokens(srv.URL, ca.PEM, "first-token", "second-token")),
		login.ID("h"), login.Backoff(time.Millisecond, time.Millisecond))
	if status, _ := get(t, v, srv.URL+"/x"); status != 200 {
		t.Fatalf("GET = %d, want 200 after the re-login", status)
	}
	want := login.Reason{Kind: login.Rejected, StatusCode: 401}
	if got := r.last(); got != want {
		t.Errorf("reason after a 401 with a %d-byte challenge: %v, want %+v", len(huge), got.Kind, want)
	}
	if strings.Contains(logs.String(), strings.Repeat("x", 100)) {
		t.Errorf("the log carries the huge challenge (%d bytes of log)", len(logs.String()))
	}
}

// A server (an API gateway, an OAuth proxy) may repeat the rejected token in
// its challenge (error_description="token ... is revoked"). The vault logs a
// login's reason and hands it to plugins: the rejected credential's secret
// must not reach the log through it.
func TestChallengeThatRepeatsTheTokenIsNotLogged(t *testing.T) {
	const secret = "s3cr3t-first-token-0123456789"
	ca := testpki.NewCA(t)
	srv := challengeServer(t, ca, "Bearer "+secret, func(auth string) string {
		return `Bearer error="invalid_token", error_description="token ` + strings.TrimPrefix(auth, "Bearer ") + ` is revoked"`
	})
	var logs testlog.Buffer
	var r reasons
	v := New(Options{NoFallback: true, Logger: logs.Logger(1)})
	defer v.Close()
	v.OnLogin(r.wrap(twoTokens(srv.URL, ca.PEM, secret, "second-token")),
		login.ID("h"), login.Backoff(time.Millisecond, time.Millisecond))
	if status, _ := get(t, v, srv.URL+"/x"); status != 200 {
		t.Fatalf("GET = %d, want 200 after the re-login", status)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log carries the rejected token, from the server's challenge:\n%s", logs.String())
	}
	if got := r.last(); got.Kind != login.Rejected || got.StatusCode != 401 || strings.Contains(got.Challenge, secret) {
		t.Errorf("reason after the 401 = %+v, want Rejected, 401, without the token", got)
	}
}
