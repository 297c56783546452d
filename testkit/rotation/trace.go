package rotation

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"
)

// trace records what one request went through, as offsets from its start:
// each time the HTTP transport asked for a connection (after the vault and
// client-go's own layers), got one, dialled, shook hands, wrote the request
// and read the first byte of the answer. A request that client-go retried
// (a 429 with Retry-After, say) shows two rounds; time before the first
// GetConn was spent above the transport: client-go's rate limiter, or the
// vault selecting a credential or waiting for a login.
type trace struct {
	op     string
	start  time.Time
	mu     sync.Mutex
	events []string
}

func newTrace(op string) *trace { return &trace{op: op, start: time.Now()} }

func (t *trace) add(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, fmt.Sprintf("%s %s", time.Since(t.start).Round(100*time.Microsecond), fmt.Sprintf(format, args...)))
}

type traceKey struct{}

// Traced wraps a round tripper (the vault's, through rest.Config.Wrap) so
// that the trace of a request marks when it entered and left it: between
// entering and the first get-conn, the request waited in the vault.
func Traced(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		t, _ := req.Context().Value(traceKey{}).(*trace)
		if t != nil {
			t.add("enter-vault")
		}
		resp, err := rt.RoundTrip(req)
		if t != nil {
			t.add("leave-vault err=%v", err)
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// with returns ctx with t hooked into its HTTP requests.
func (t *trace) with(ctx context.Context) context.Context {
	ctx = context.WithValue(ctx, traceKey{}, t)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) { t.add("get-conn") },
		GotConn: func(i httptrace.GotConnInfo) {
			t.add("got-conn reused=%v idle=%v", i.Reused, i.IdleTime.Round(time.Millisecond))
		},
		ConnectStart:      func(string, string) { t.add("connect-start") },
		ConnectDone:       func(_, _ string, err error) { t.add("connect-done err=%v", err) },
		TLSHandshakeStart: func() { t.add("tls-start") },
		TLSHandshakeDone:  func(_ tls.ConnectionState, err error) { t.add("tls-done err=%v", err) },
		WroteRequest:      func(i httptrace.WroteRequestInfo) { t.add("wrote-request err=%v", i.Err) },
		GotFirstResponseByte: func() {
			t.add("first-byte")
		},
	})
}

// String lists the events, and the end of the request.
func (t *trace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.events, ", ")
}
