package addonauth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// bound keeps a request within its token's life. Its context ends, and a
// connection the handler hijacked is closed, at MaxRequestDuration, at the
// token's expiry, and when a review every SuccessTTL finds the token
// revoked (or cannot vouch for it past StaleIfError). A request that
// returns releases it; a hijacked connection keeps it armed until the
// connection is closed.
type bound struct {
	// Set when made, read only.
	a        *Authenticator
	token    string    // "" without rechecks
	user     User      // as verified when the request began
	deadline time.Time // zero: none
	reason   string    // why the deadline ends it: max_duration or token_expired
	parent   context.Context
	ctx      context.Context
	cancel   context.CancelFunc
	w        http.ResponseWriter // the server's, whose connection cut ends

	mu      sync.Mutex  // guards the fields below
	since   uint64      // seq of the last verdict the request relied on
	recheck *time.Timer // the next review; nil without rechecks
	expire  *time.Timer // the deadline of a hijacked connection, which the context cannot end
	conn    *boundConn  // the hijacked connection; nil before
	done    bool        // released or ended: its timers are stopped
	served  bool        // the handler has returned
}

// bound gives a request a context that ends at MaxRequestDuration, at its
// token's expiry, and when a periodic review refuses the token, and a
// ResponseWriter whose hijacked connection ends with it. stop is for when
// the handler returns: it releases the bound, unless the connection was
// hijacked, which then keeps it until its Close.
func (a *Authenticator) bound(parent context.Context, authorization string, u User, w http.ResponseWriter) (context.Context, http.ResponseWriter, func()) {
	b := &bound{a: a, user: u, parent: parent, w: w}
	if d := a.opts.MaxRequestDuration; d > 0 { // negative: none
		b.deadline, b.reason = a.opts.now().Add(d), "max_duration"
	}
	if !u.Expires.IsZero() && (b.deadline.IsZero() || u.Expires.Before(b.deadline)) {
		b.deadline, b.reason = u.Expires, "token_expired"
	}
	if b.deadline.IsZero() {
		b.ctx, b.cancel = context.WithCancel(parent)
	} else {
		b.ctx, b.cancel = context.WithDeadline(parent, b.deadline)
	}
	if !a.opts.NoReview && authorization != "" {
		_, token, _ := strings.Cut(authorization, " ")
		b.token = strings.TrimSpace(token)
		b.mu.Lock()
		// Verdicts asked from now on are news to this request; the one it
		// began with may be older than the request, so is not.
		b.since = a.reviewer.seq.Load()
		// The first check is due a SuccessTTL on, or when the verdict the
		// request was let in on lapses if sooner: a request begun on a
		// verdict about to lapse must not keep a revoked token for two.
		// Only a request that lasts is checked; a short one costs the
		// timer only.
		b.recheck = time.AfterFunc(min(b.every(), a.reviewer.trustedFor(b.token)), b.review)
		b.mu.Unlock()
	}
	context.AfterFunc(b.ctx, b.cut) // runs once: finish always ends ctx
	return b.ctx, b.wrap(w), b.returned
}

// returned is called when the handler returns.
func (b *bound) returned() {
	b.mu.Lock()
	b.served = true
	hijacked := b.conn != nil
	b.mu.Unlock()
	if !hijacked {
		b.finish("")
	}
}

// finish ends the bound once: stops its timers, ends the context and
// closes a hijacked connection. reason is why the middleware ends the
// request (a metric), "" when the request ended by itself. It tells
// whether this call ended it.
func (b *bound) finish(reason string) bool {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return false
	}
	b.done = true
	if b.recheck != nil {
		b.recheck.Stop()
	}
	if b.expire != nil {
		b.expire.Stop()
	}
	conn := b.conn
	b.mu.Unlock()
	if reason == "" && b.parent.Err() == nil && errors.Is(b.ctx.Err(), context.DeadlineExceeded) {
		reason = b.reason // the handler returned as the context's deadline ended it
	}
	if reason != "" {
		b.a.metrics.ended.WithLabelValues(reason).Inc()
	}
	b.cancel()
	if conn != nil {
		_ = conn.Close()
	}
	return true
}

// review ends the request as a new one with its token would be refused:
// revoked, or unverifiable past StaleIfError of an outage. A verdict asked
// since the last one the request relied on serves, whoever asked it: the
// streams that hold one token share one review a SuccessTTL, and the next
// review is due when that verdict goes stale.
func (b *bound) review() {
	b.mu.Lock()
	since, done := b.since, b.done
	b.mu.Unlock()
	if done {
		return
	}
	// The context of a hijacked connection ended with its handler; the
	// review must not.
	seq, until, err := b.a.reviewer.recheck(context.WithoutCancel(b.ctx), b.token, b.user, since)
	if err != nil {
		reason := "revoked"
		if errors.Is(err, errUnavailable) {
			reason = "unavailable"
		}
		if b.finish(reason) {
			b.a.opts.Logger.V(1).Info("request ended: its token was refused", "reason", err.Error())
		}
		return
	}
	next := b.every()
	if d := until.Sub(b.a.opts.now()); seq > since && d > 0 && d < next {
		next = d
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.since = max(b.since, seq)
		b.recheck.Reset(next)
	}
}

// untrustedRecheck is how often a long request is reviewed again when
// SuccessTTL is none: no verdict is trusted past its request, yet a stream
// must end soon after its token is revoked.
const untrustedRecheck = time.Second

// every is how often the request is reviewed again: every SuccessTTL.
func (b *bound) every() time.Duration {
	if b.a.opts.SuccessTTL <= 0 {
		return untrustedRecheck
	}
	return b.a.opts.SuccessTTL
}

// cut ends the reads and writes of the request's connection when the
// bound ends the request while its handler still runs: the context alone
// stops no handler blocked writing to a caller that has stopped reading,
// or reading a body the caller trickles, nor the proxied upstream
// connection it holds. Not once the handler has returned (the connection
// may be serving the next request: returned waits for mu), nor on a
// hijacked connection (finish closes it), nor for a caller that has gone.
func (b *bound) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.served || b.conn != nil || b.parent.Err() != nil {
		return
	}
	cutConn(b.w)
}

// cutConn makes w's connection's pending and next reads and writes fail
// at once. A writer without deadlines (HTTP/2 has them per stream) is left
// as it is.
func cutConn(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	now := time.Now()
	_ = rc.SetWriteDeadline(now)
	_ = rc.SetReadDeadline(now)
}
