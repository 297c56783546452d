package addonauth

import (
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// refusalDrain is how long, after a refusal is written, the rest of the
// refused body (at most 256 KiB of it) may still be read before the
// connection closes: long enough for a body already on its way, far too
// short for a trickled one to hold anything.
const refusalDrain = time.Second

// closeUnread makes the answer to a refused request that has a body the
// last one on its HTTP/1 connection, and bounds the connection's reads:
// the body is not waited for. Called before the answer is written.
//
// net/http keeps a connection only after reading what is left of the
// body (up to 256 KiB), before it writes the answer and again once the
// handler returns: a caller sending its body a byte a second held the
// connection, and got no answer, for as long as it pleased. An answer
// with "Connection: close" is written at once; net/http then reads the
// rest of the body (up to 256 KiB, and only for refusalDrain) before it
// closes the connection. Not reading it at all would close the socket
// with the caller's bytes unread, which answers the caller with a reset:
// a caller still writing its body (a client whose token expired, posting
// 100 KiB) got the reset on its write, and Go's client, among others,
// reports that rather than the refusal it had received.
//
// HTTP/2 needs none of this: its server resets the stream of a body the
// handler did not read, and its connection carries other streams. A
// request without a body keeps its connection: a new one (a TLS
// handshake) per refusal would cost more than the refusal.
//
// Where w cannot set a read deadline (a wrapper without Unwrap in front
// of the middleware), the answer still goes out at once; the connection
// then ends when net/http gives up reading (at most 256 KiB).
func closeUnread(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refusalDrain))
}

// refusalSummaryEvery is how often at most a burst of refusals is logged
// at INFO: each refusal is at V(1), with its reason.
const refusalSummaryEvery = time.Minute

// refusalLog is the INFO line for refused callers: the first refusal is
// logged at once, those that follow within refusalSummaryEvery are
// counted, and the first one after that logs the count. A burst of a
// thousand refused tokens is so one or two lines, not a thousand, and a
// proxy that refuses nobody says nothing.
type refusalLog struct {
	msg string // the line's message; "" for refused callers

	mu     sync.Mutex
	last   time.Time      // of the last line; zero before the first
	counts map[string]int // refusals since, by result
}

// note counts a refusal of result (unauthenticated, forbidden) for reason
// at now, and logs the line when it is due.
func (l *refusalLog) note(log logr.Logger, now time.Time, result, reason string) {
	l.mu.Lock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.counts[result]++
	if !l.last.IsZero() && now.Sub(l.last) < refusalSummaryEvery {
		l.mu.Unlock()
		return
	}
	counts, since := l.counts, l.last
	l.counts, l.last = nil, now
	l.mu.Unlock()
	kv := []any{}
	for _, k := range []string{"unauthenticated", "forbidden", "crossOrigin"} {
		if n := counts[k]; n > 0 {
			kv = append(kv, k, n)
		}
	}
	kv = append(kv, "lastReason", reason)
	if !since.IsZero() {
		kv = append(kv, "since", since.UTC().Format(time.RFC3339))
	}
	msg := l.msg
	if msg == "" {
		msg = "callers refused (each one logged at V(1); this line at most once a minute)"
	}
	log.Info(msg, kv...)
}
