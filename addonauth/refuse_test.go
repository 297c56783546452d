package addonauth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testwait"
)

// slowBodyWait is how long a test waits for an answer that must come at
// once: a hang's bound, far below the hours a body sent a byte a second
// would take.
const slowBodyWait = testwait.Hang

// sendHead opens a connection to addr and sends a request head announcing
// a body (framing: "length" or "chunked") of which it sends only the first
// byte, as a caller trickling its body would.
func sendHead(t *testing.T, addr, framing string, header http.Header) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var b strings.Builder
	b.WriteString("POST /hello HTTP/1.1\r\nHost: upstream\r\n")
	for name, values := range header {
		for _, v := range values {
			fmt.Fprintf(&b, "%s: %s\r\n", name, v)
		}
	}
	switch framing {
	case "length":
		b.WriteString("Content-Length: 100000\r\n\r\nx")
	case "chunked":
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n1000\r\nx")
	default:
		t.Fatalf("framing %q", framing)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	return conn
}

// A refused request is answered at once and its connection closed,
// without waiting for its body: net/http reads up to 256 KiB of an
// unread body before it answers a request on a connection it keeps,
// so five callers trickling bodies held the server with no answer.
func TestRefusalsDoNotWaitForTheBody(t *testing.T) {
	type tc struct {
		name   string
		opts   Options
		prep   func(t *testing.T, s *setup) http.Header
		status int
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	cases := []tc{
		{"no token", Options{}, func(*testing.T, *setup) http.Header { return nil }, 401},
		{"bad token", Options{}, func(*testing.T, *setup) http.Header { return bearer("garbage") }, 401},
		{"over the rate", Options{RatePerUser: 0.001, BurstPerUser: 1}, func(t *testing.T, s *setup) http.Header {
			tok := s.api.token(t, "team-a", "client", audience, time.Hour)
			s.get(t, tok, nil) // takes the one token of the bucket
			return bearer(tok)
		}, 429},
		{"forbidden", Options{Authorization: &Authorization{}}, func(t *testing.T, s *setup) http.Header {
			return bearer(s.api.token(t, "team-a", "client", audience, time.Hour))
		}, 403},
		{"unavailable", Options{}, func(t *testing.T, s *setup) http.Header {
			s.api.setDown(true)
			return bearer(s.api.token(t, "team-a", "client", audience, time.Hour))
		}, 503},
	}
	for _, c := range cases {
		for _, framing := range []string{"length", "chunked"} {
			t.Run(c.name+"/"+framing, func(t *testing.T) {
				t.Parallel()
				s := newSetup(t, c.opts)
				header := c.prep(t, s)
				before := s.up.count()
				conn := sendHead(t, s.srv.Listener.Addr().String(), framing, header)
				_ = conn.SetReadDeadline(time.Now().Add(slowBodyWait))
				br := bufio.NewReader(conn)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("no answer while the body trickles: %v", err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.status || !resp.Close {
					t.Errorf("answer = %d, Connection: %q; want %d, close", resp.StatusCode, resp.Header.Get("Connection"), c.status)
				}
				if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
					t.Errorf("after the answer, read = %v; want the connection closed", err)
				}
				if s.up.count() != before {
					t.Error("the refused request reached the upstream")
				}
			})
		}
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !errors.Is(err, os.ErrDeadlineExceeded)
}

// A refused request without a body keeps its connection: there is nothing
// to wait for, and a new connection (a TLS handshake) per refusal would
// cost the server more than the refusal.
func TestRefusalsWithoutABodyKeepTheConnection(t *testing.T) {
	s := newSetup(t, Options{})
	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(slowBodyWait))
	br := bufio.NewReader(conn)
	for i := range 3 {
		if _, err := conn.Write([]byte("GET /hello HTTP/1.1\r\nHost: upstream\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Close {
			t.Errorf("request %d: %d, close %v; want 401 on a kept connection", i, resp.StatusCode, resp.Close)
		}
	}
}

// Over HTTP/2 the server resets the stream of an unread body instead of
// reading it: the answer comes at once there too, and the connection,
// which other streams share, stays.
func TestRefusalsOverHTTP2DoNotWaitForTheBody(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a.Middleware(&recorder{}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	body, feed := io.Pipe()
	defer feed.Close()
	go func() { _, _ = feed.Write([]byte("x")) }() // and no more
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hello", body)
	req.ContentLength = 100000
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		resp.Body.Close()
		done <- resp
	}()
	select {
	case resp := <-done:
		if resp != nil && (resp.StatusCode != 401 || resp.ProtoMajor != 2 || resp.Header.Get("Connection") != "") {
			t.Errorf("answer = %d over HTTP/%d with Connection %q, want 401 over HTTP/2 without", resp.StatusCode, resp.ProtoMajor, resp.Header.Get("Connection"))
		}
	case <-time.After(slowBodyWait):
		feed.CloseWithError(errors.New("gave up"))
		<-done
		t.Fatal("no answer over HTTP/2 while the body trickles")
	}
}

// A forwarded request's body is the upstream's to read, and its
// connection is kept.
func TestForwardedBodiesAreRead(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d", len(b))
	})))
	defer srv.Close()
	tok := api.token(t, "team-a", "client", audience, time.Hour)
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hello", strings.NewReader(strings.Repeat("x", 300<<10)))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != fmt.Sprint(300<<10) || resp.Close {
			t.Errorf("POST %d = %d %q close %v, want 200 with the whole body read on a kept connection", i, resp.StatusCode, b, resp.Close)
		}
	}
}

// A caller that sent its whole body before the refusal came (a client
// whose token expired, posting 100 KiB) gets the refusal, not a reset: the
// connection is closed only once what the caller sent promptly is read.
// Closed with unread bytes in its buffer, a socket answers with a reset,
// and the caller's kernel drops the refusal it had not read yet; client-go
// refreshes a token on 401, not on a reset.
func TestRefusalsReachCallersWhoseBodyIsInFlight(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), AllowPaths: []string{"/hello"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a.Middleware(&recorder{}))
	closed := make(chan struct{}, 16)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	body := strings.Repeat("x", 100<<10)
	for _, c := range []struct{ name, path, framing string }{
		{"401/length", "/hello", "length"},
		{"401/chunked", "/hello", "chunked"},
		{"404/length", "/elsewhere", "length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(slowBodyWait))
			req := "POST " + c.path + " HTTP/1.1\r\nHost: upstream\r\n"
			if c.framing == "length" {
				req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
			} else {
				req += fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
			}
			if _, err := conn.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			// The caller reads only once the server is done with the
			// connection, as a caller still writing would.
			select {
			case <-closed:
			case <-time.After(slowBodyWait):
				t.Fatal("the server kept the connection of a refused request with a body")
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("the caller lost the refusal: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// A reset, not an end, says the server dropped what the
			// caller sent: a caller still writing gets the reset on its
			// write, and most (Go's client among them) report that
			// instead of the answer.
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Errorf("after the answer, read = %v; want the connection ended, not reset", err)
			}
			if want := map[string]int{"/hello": 401, "/elsewhere": 404}[c.path]; resp.StatusCode != want {
				t.Errorf("answer = %d, want %d", resp.StatusCode, want)
			}
		})
	}
}

// A request pipelined behind a refused one with a body is never served:
// the refusal ends the connection, and nothing of the refused body is
// read as a request. One behind a refused request without a body is
// served in turn, on the same connection.
func TestRefusalsEndPipelines(t *testing.T) {
	s := newSetup(t, Options{})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	// The refused body is itself a request carrying the token: read as
	// one, it would reach the upstream.
	smuggled := "GET /hello HTTP/1.1\r\nHost: upstream\r\nAuthorization: Bearer " + tok + "\r\n\r\n"
	for _, c := range []struct {
		name, first string
		answers     []int
	}{
		{"length", fmt.Sprintf("POST /hello HTTP/1.1\r\nHost: upstream\r\nContent-Length: %d\r\n\r\n%s", len(smuggled), smuggled), []int{401}},
		{"chunked", fmt.Sprintf("POST /hello HTTP/1.1\r\nHost: upstream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled), []int{401}},
		{"no body", "GET /hello HTTP/1.1\r\nHost: upstream\r\n\r\n", []int{401, 200}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := s.up.count()
			conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(slowBodyWait))
			if _, err := conn.Write([]byte(c.first + smuggled)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			var got []int
			for len(got) < len(c.answers) {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("answer %d: %v", len(got), err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				got = append(got, resp.StatusCode)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.answers) {
				t.Errorf("answers = %v, want %v", got, c.answers)
			}
			if len(c.answers) == 1 {
				if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
					t.Errorf("after the refusal, read = %v; want the connection closed", err)
				}
			}
			if n := s.up.count() - before; n != len(c.answers)-1 {
				t.Errorf("the upstream got %d requests, want %d", n, len(c.answers)-1)
			}
		})
	}
}

// A refused request that waits for 100 Continue gets its refusal at once,
// never a 100 Continue (which would ask for the body), and its connection
// ends: the caller may send the body after all, as curl does after a
// second.
func TestRefusalsDoNotAskForTheBody(t *testing.T) {
	s := newSetup(t, Options{})
	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(slowBodyWait))
	if _, err := conn.Write([]byte("POST /hello HTTP/1.1\r\nHost: upstream\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !resp.Close {
		t.Errorf("answer = %d, close %v; want 401, close", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("after the answer, read = %v; want the connection closed", err)
	}
}
