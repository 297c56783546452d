package main

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/authvault/authvault/addonauth"
)

// newHandler is the sidecar's handler: mw (the authenticator's
// middleware) in front of proxy, with verification bounded.
//
// The server has no read timeout (streams last), so until a request is
// forwarded its connection's reads end at verifyTimeout: nothing reads
// the body meanwhile, and whatever answers a request that is not
// forwarded (net/http reads what is left of an unread body before
// keeping a connection) cannot be held by a body trickled in a byte at a
// time for longer. The bound is lifted when a verified caller's request
// is forwarded; a request whose verification took longer is answered 503
// instead. A request for an ignored path is forwarded unverified: its
// caller may be anyone, so its body keeps the bound, lifted when the body
// ends.
func newHandler(mw func(http.Handler) http.Handler, proxy http.Handler, verifyTimeout time.Duration) http.Handler {
	forward := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v, ok := r.Context().Value(verifyingKey{}).(*verifying); ok {
			if time.Now().After(v.deadline) {
				w.Header().Set("Connection", "close")
				w.Header().Set("Retry-After", "1")
				http.Error(w, "the caller could not be verified in time", http.StatusServiceUnavailable)
				return
			}
			if _, verified := addonauth.UserFrom(r.Context()); verified || r.ContentLength == 0 {
				v.lift()
			} else {
				r.Body = &liftAtEnd{ReadCloser: r.Body, v: v}
			}
		}
		proxy.ServeHTTP(w, r)
	})
	verified := mw(forward)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := &verifying{rc: http.NewResponseController(w), deadline: time.Now().Add(verifyTimeout)}
		_ = v.rc.SetReadDeadline(v.deadline)
		defer v.finish()
		verified.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifyingKey{}, v)))
	})
}

// verifying is a request under verification. Its ResponseController is
// made from the server's own ResponseWriter, so the bound can be lifted
// whatever the middleware hands on.
type verifying struct {
	rc       *http.ResponseController
	deadline time.Time

	mu       sync.Mutex
	finished bool // the handler returned: the connection may be the next request's
}

type verifyingKey struct{}

// lift ends the bound on reads, unless the handler has returned: a body
// may end later, read by a goroutine a transport left behind, and the
// connection's deadline is then the next request's (the server's header
// and idle timeouts).
func (v *verifying) lift() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.finished {
		_ = v.rc.SetReadDeadline(time.Time{})
	}
}

func (v *verifying) finish() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.finished = true
}

// liftAtEnd lifts the bound on reads when the body it reads ends: past
// it, the connection's only reads are net/http's, which watch for the
// caller going away, and bounded they would end the request.
type liftAtEnd struct {
	io.ReadCloser
	v *verifying
}

func (b *liftAtEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.v.lift()
	}
	return n, err
}
