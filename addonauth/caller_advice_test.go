package addonauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// A caller's vault that sends the service a token for another audience
// (one for the API server) reads the middleware's own challenge and says,
// in its log line's action, which audience to log in for: the words of
// docs/addonauth.md's caller, not those for an API server. The token
// appears in no line.
func TestACallersVaultIsToldTheServicesAudience(t *testing.T) {
	t.Run("the refused token given again", func(t *testing.T) { callerAdvice(t, false) })
	t.Run("a new token at each login, as TokenRequest mints", func(t *testing.T) { callerAdvice(t, true) })
}

func callerAdvice(t *testing.T, fresh bool) {
	s := newSetup(t, Options{})
	ca := testpki.NewCA(t)
	srv := httptest.NewUnstartedServer(s.auth.Middleware(s.up))
	srv.TLS = ca.ServerTLS(t, "greeter", nil)
	srv.StartTLS()
	defer srv.Close()
	mint := func() string { return s.api.token(t, "team-a", "client", "https://kubernetes.default.svc", time.Hour) }
	token := mint()

	var mu sync.Mutex
	var logs strings.Builder
	caller := vault.New(vault.Options{NoFallback: true, Logger: funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs.WriteString(prefix + args + "\n")
	}, funcr.Options{Verbosity: 1})})
	defer caller.Close()
	var minted sync.Map // every token given, none of which may be logged
	caller.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		tok := token
		if fresh {
			tok = mint()
		}
		minted.Store(tok, true)
		return &login.ConnectionInfo{Server: srv.URL, CAData: ca.PEM, Token: tok}, nil
	}, login.ID("api-server token"))

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hello", nil)
	resp, err := (&http.Client{Transport: caller.Transport()}).Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a token of another audience got %s, want 401", resp.Status)
		}
	}
	if n := s.up.count(); n != 0 {
		t.Fatalf("%d requests of another audience's token reached the service", n)
	}

	advice := `log in with a token for that audience (handlers.TokenRequest with Audiences: []string{\"` + audience + `\"}`
	read := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
	testwait.For(t, "the caller's log to say which audience to log in for", func() bool { return strings.Contains(read(), advice) })
	got := read()
	minted.Range(func(tok, _ any) bool {
		if s := tok.(string); strings.Contains(got, s[len(s)-20:]) {
			t.Errorf("the caller's log holds a token:\n%s", got)
		}
		return true
	})
	if strings.Contains(got, "the cluster's authenticator") {
		t.Errorf("the caller's log also gives the advice for an API server:\n%s", got)
	}
}
