package addonauth

import (
	"net/http"
	"time"
)

// closeUnread makes the answer to a refused request that has a body the
// last one on its HTTP/1 connection, and ends the connection's reads now:
// the body is never read. Called before the answer is written.
//
// net/http keeps a connection only after reading what is left of the
// body (up to 256 KiB), before it writes the answer and again once the
// handler returns: a caller sending its body a byte a second held the
// connection, and got no answer, for as long as it pleased. An answer
// with "Connection: close" is written at once; the past read deadline
// ends the final read of the body, so the connection closes right after.
// HTTP/2 needs neither: its server resets the stream of a body the
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
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
