package addonauth

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testwait"
)

// A caller that stops reading a response (a watch it no longer drains)
// held the handler, and the upstream connection a proxy keeps for it, for
// as long as it liked: MaxRequestDuration and the token's end only ended
// the context, and a handler blocked writing does not look at it. The
// connection's writes now fail when the bound ends the request, on a
// verified path and on an ignored one alike.
func TestCallersThatStopReadingAreCutAtTheBound(t *testing.T) {
	for _, ignored := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignored=%v", ignored), func(t *testing.T) {
			api := newFakeAPI(t)
			opts := Options{Audience: audience, Config: api.config(), MaxRequestDuration: 300 * time.Millisecond}
			if ignored {
				opts.IgnorePaths = []string{"/stream"}
			}
			a, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			returned := make(chan error, 1)
			chunk := []byte(strings.Repeat("x", 64<<10))
			srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for { // a stream that writes until it cannot, as a proxy copying a watch does
					if _, err := w.Write(chunk); err != nil {
						returned <- err
						return
					}
				}
			})))
			defer srv.Close()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			auth := ""
			if !ignored {
				auth = "Authorization: Bearer " + api.token(t, "team-a", "watcher", audience, time.Hour) + "\r\n"
			}
			if _, err := io.WriteString(conn, "GET /stream HTTP/1.1\r\nHost: addon\r\n"+auth+"\r\n"); err != nil {
				t.Fatal(err)
			}
			// Read the head, then stop reading: the socket buffers fill.
			if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("response: %v %v", resp, err)
			}
			select {
			case err := <-returned:
				if err == nil {
					t.Error("the handler's write did not fail")
				}
			case <-time.After(testwait.Hang):
				t.Fatalf("the handler still writes to a caller that stopped reading, %v past MaxRequestDuration", testwait.Hang)
			}
		})
	}
}
