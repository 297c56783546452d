package vault

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testpki"
)

// reasons records why each call of a handler was made.
type reasons struct {
	mu  sync.Mutex
	got []login.Reason
}

func (r *reasons) wrap(h login.Handler) login.Handler {
	return func(ctx context.Context) (*login.ConnectionInfo, error) {
		reason, ok := login.ReasonFrom(ctx)
		if !ok {
			reason = login.Reason{Kind: "none in the context"}
		}
		r.mu.Lock()
		r.got = append(r.got, reason)
		r.mu.Unlock()
		return h(ctx)
	}
}

func (r *reasons) last() login.Reason {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[len(r.got)-1]
}

func (r *reasons) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// A handler learns why it runs: first login, refresh, expiry, rejection.
func TestHandlerKnowsWhyItRuns(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(1)})
	v.core.jitter = func(int64) int64 { return 0 }
	h := &counter{lifetime: time.Hour, now: clk.Now}
	var r reasons
	// No retries within a login: a failed refresh ends, and nothing runs
	// behind the test's back on the fake clock.
	v.OnLogin(r.wrap(h.login), login.ID("h"), login.Retries(0))

	c := mustSelect(t, v)
	if got := r.last(); got.Kind != login.FirstLogin {
		t.Errorf("first call: reason %v, want %v", got, login.FirstLogin)
	}
	clk.Step(55 * time.Minute) // inside the refresh window
	eventually(t, "the refresh", func() bool { return r.count() == 2 })
	if got := r.last(); got.Kind != login.Refresh {
		t.Errorf("second call: reason %v, want %v", got, login.Refresh)
	}
	eventually(t, "the refreshed credential", func() bool { return current(v, "h") != c })

	h.failWith(errors.New("store down")) // refreshes fail until the credential expires
	calls := r.count()
	clk.Step(time.Hour)
	eventually(t, "the failed refresh to end", func() bool { return r.count() > calls && idle(v) })
	v.mu.Lock() // no backoff, no retry of the refresh: the next login is the caller's
	hh := v.core.lookup("h")
	hh.retryAt = time.Time{}
	hh.refreshAt = time.Time{}
	v.mu.Unlock()
	h.heal()
	selectAdvancing(t, v, clk, 100*time.Millisecond) // past the login floor
	if got := r.last(); got.Kind != login.Expired {
		t.Errorf("after expiry: reason %v, want %v", got, login.Expired)
	}

	c = mustSelect(t, v)
	_ = v.Invalidate(context.Background(), c, &UnauthorizedError{Server: "https://api.example:6443", Status: "401 Unauthorized",
		StatusCode: http.StatusUnauthorized, Challenge: `Bearer error="invalid_token"`})
	clk.Step(handlerconf.DefaultBackoffInitial) // past the login floor
	mustSelect(t, v)
	want := login.Reason{Kind: login.Rejected, StatusCode: 401, Challenge: `Bearer error="invalid_token"`}
	if got := r.last(); got != want {
		t.Errorf("after a 401: reason %+v, want %+v", got, want)
	}
	if !strings.Contains(logs.String(), `"reason"="rejected by the server (401, WWW-Authenticate: Bearer error=\"invalid_token\")"`) {
		t.Errorf("the log does not give the login's reason:\n%s", logs.String())
	}
}

// Through the transport: the 401's status and WWW-Authenticate header reach
// the handler's next login.
func TestRejectionReasonCarriesTheResponse(t *testing.T) {
	var r reasons
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, "")
	iss := &issuer{srv: srv, caPEM: ca.PEM}
	v := New(Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(r.wrap(iss.login), login.Backoff(10*time.Millisecond, time.Second))
	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
		t.Fatal("GET failed")
	}
	srv.revoke(iss.latest())
	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
		t.Fatal("GET after the revocation failed")
	}
	want := login.Reason{Kind: login.Rejected, StatusCode: 401, Challenge: `Bearer realm="test-api"`}
	if got := r.last(); got != want {
		t.Errorf("after a 401: reason %+v, want %+v", got, want)
	}
}

// A handler called outside the vault finds no reason.
func TestNoReasonOutsideTheVault(t *testing.T) {
	if r, ok := login.ReasonFrom(context.Background()); ok {
		t.Errorf("ReasonFrom(Background) = %v, true; want false", r)
	}
}
