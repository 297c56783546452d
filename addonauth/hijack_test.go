package addonauth

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testwait"
)

// upgradeRequest is a request for a protocol switch, with the token.
func upgradeRequest(token string) string {
	return "GET /ws HTTP/1.1\r\nHost: addon\r\nAuthorization: Bearer " + token +
		"\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"
}

// echoUpgrade is a handler that switches protocols by hijacking the
// connection, then echoes what it reads. atOnce: it returns right after
// the hijack and a goroutine of its own keeps the connection, as many
// WebSocket servers do. served is done when the echo has ended and the
// handler closed the connection.
func echoUpgrade(t *testing.T, atOnce bool, served *sync.WaitGroup) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		echo := func() {
			defer conn.Close()
			_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			_, _ = io.Copy(conn, brw)
		}
		if atOnce {
			served.Go(echo)
			return
		}
		served.Add(1)
		defer served.Done()
		echo()
	})
}

// dialUpgrade switches protocols with srv and checks that the echo works.
func dialUpgrade(t *testing.T, addr, token string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, upgradeRequest(token)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade = %d, want 101", resp.StatusCode)
	}
	if _, err := io.WriteString(conn, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo = %q %v, want ping", line, err)
	}
	return conn, br
}

// waitClosed waits for the server to close conn: a read that ends (EOF,
// reset) rather than waits. It fails after limit.
func waitClosed(t *testing.T, conn net.Conn, br *bufio.Reader, limit time.Duration) time.Time {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	_, err := br.ReadString('\n')
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the hijacked connection was still open %v later", limit)
	}
	if err == nil {
		t.Fatal("the server sent data nobody asked for")
	}
	return time.Now()
}

// A connection a handler hijacks (a WebSocket) ends with its token, as a
// stream does: at its expiry, when a review finds it revoked, and at
// MaxRequestDuration, whether the handler keeps it in ServeHTTP or
// returns and keeps it in a goroutine.
func TestHijackedConnectionsEndWithTheirToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   Options
		life   time.Duration
		revoke bool
	}{
		{name: "expiry", opts: Options{SuccessTTL: time.Hour, Leeway: -1}, life: 2 * time.Second},
		{name: "revocation", opts: Options{SuccessTTL: 100 * time.Millisecond}, life: time.Hour, revoke: true},
		{name: "max duration", opts: Options{SuccessTTL: time.Hour, MaxRequestDuration: 300 * time.Millisecond}, life: time.Hour},
	} {
		for _, atOnce := range []bool{false, true} {
			name := tc.name + "/in ServeHTTP"
			if atOnce {
				name = tc.name + "/after ServeHTTP returned"
			}
			t.Run(name, func(t *testing.T) {
				api := newFakeAPI(t)
				opts := tc.opts
				opts.Audience, opts.Config = audience, api.config()
				a, err := New(opts)
				if err != nil {
					t.Fatal(err)
				}
				var served sync.WaitGroup
				srv := httptest.NewServer(a.Middleware(echoUpgrade(t, atOnce, &served)))
				defer srv.Close()
				tok := api.token(t, "team-a", "socket", audience, tc.life)
				u, err := a.Authenticate(t.Context(), tok)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				conn, br := dialUpgrade(t, srv.Listener.Addr().String(), tok)
				if tc.revoke {
					api.revoke(tok)
				}
				closed := waitClosed(t, conn, br, 10*time.Second)
				switch {
				case tc.life < time.Hour && closed.Before(u.Expires):
					t.Errorf("closed at %v, before the token's expiry %v", closed, u.Expires)
				case tc.opts.MaxRequestDuration > 0 && closed.Sub(start) < tc.opts.MaxRequestDuration:
					t.Errorf("closed %v after the upgrade, before MaxRequestDuration", closed.Sub(start))
				}
				waitGroup(t, &served, "the handler's echo")
			})
		}
	}
}

// waitGroup waits for wg, a hang's worth of time at most.
func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testwait.Hang):
		t.Fatalf("%s did not end", what)
	}
}

// A handler that hijacks a request whose token was revoked meanwhile gets
// no connection: the bound has ended.
func TestHijackAfterTheBoundEndedIsRefused(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tok := api.token(t, "team-a", "socket", audience, time.Hour)
	hijacked := make(chan error, 1)
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.revoke(tok)
		<-r.Context().Done() // the recheck ended the request
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			conn.Close()
		}
		hijacked <- err
	})))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, upgradeRequest(tok)); err != nil {
		t.Fatal(err)
	}
	if err := <-hijacked; err == nil {
		t.Error("Hijack after the token's revocation ended the request gave a connection")
	}
}

// The sidecar's path: a ReverseProxy behind the middleware switches
// protocols with its upstream (through ResponseController's Hijack). The
// connection ends at revocation, and a half-close by the upstream reaches
// the caller as one (CloseWrite is not hidden): the caller can still send.
func TestProxiedUpgradeIsBoundAndKeepsHalfClose(t *testing.T) {
	got := make(chan string, 1)
	var upstreamDone sync.WaitGroup
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("upstream Hijack: %v", err)
			return
		}
		upstreamDone.Go(func() {
			defer conn.Close()
			_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			line, _ := brw.ReadString('\n')
			if line == "half\n" {
				_, _ = io.WriteString(conn, "bye\n")
				_ = conn.(*net.TCPConn).CloseWrite()
				rest, _ := io.ReadAll(brw)
				got <- string(rest)
				return
			}
			_, _ = io.WriteString(conn, line)
			_, _ = io.Copy(conn, brw)
		})
	}))
	defer upstream.Close()
	target, _ := url.Parse(upstream.URL)
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }}

	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Middleware(proxy))
	defer srv.Close()

	t.Run("half-close", func(t *testing.T) {
		tok := api.token(t, "team-a", "half", audience, time.Hour)
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, upgradeRequest(tok))
		br := bufio.NewReader(conn)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 101 {
			t.Fatalf("upgrade = %v %v", resp, err)
		}
		_, _ = io.WriteString(conn, "half\n")
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != "bye\n" {
			t.Fatalf("after the upstream's half-close: %q %v, want bye then EOF", rest, err)
		}
		_, _ = io.WriteString(conn, "late\n")
		_ = conn.(*net.TCPConn).CloseWrite()
		select {
		case s := <-got:
			if s != "late\n" {
				t.Errorf("the upstream read %q after its half-close, want late", s)
			}
		case <-time.After(testwait.Hang):
			t.Fatal("the upstream never saw the caller's end")
		}
	})
	t.Run("revocation", func(t *testing.T) {
		tok := api.token(t, "team-a", "socket", audience, time.Hour)
		conn, br := dialUpgrade(t, srv.Listener.Addr().String(), tok)
		api.revoke(tok)
		waitClosed(t, conn, br, 10*time.Second)
	})
	waitGroup(t, &upstreamDone, "the upstream's echo")
}

// Over HTTP/2 there is nothing to hijack: the writer next gets says so,
// as the server's own does, and still flushes; a stream still ends at
// revocation.
func TestHTTP2WriterIsNoHijacker(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		proto            int
		hijacker, flush  bool
		controllerHijack error
	}
	seenc := make(chan seen, 1)
	srv := httptest.NewUnstartedServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s seen
		s.proto = r.ProtoMajor
		_, s.hijacker = w.(http.Hijacker)
		_, s.flush = w.(http.Flusher)
		_, _, s.controllerHijack = http.NewResponseController(w).Hijack()
		seenc <- s
		streaming(w, r)
	})))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	tok := api.token(t, "team-a", "watcher", audience, time.Hour)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/watch", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch = %v %v", resp, err)
	}
	defer resp.Body.Close()
	s := <-seenc
	if s.proto != 2 || s.hijacker || !s.flush || !errors.Is(s.controllerHijack, http.ErrNotSupported) {
		t.Errorf("HTTP/%d: Hijacker %v, Flusher %v, ResponseController.Hijack %v; want HTTP/2, no Hijacker, a Flusher, ErrNotSupported",
			s.proto, s.hijacker, s.flush, s.controllerHijack)
	}
	api.revoke(tok)
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(done) }()
	select {
	case <-done:
	case <-time.After(testwait.Hang):
		t.Fatalf("the HTTP/2 stream outlived its token's revocation by %v", testwait.Hang)
	}
}

// Over HTTP/1 the writer next gets offers what the server's does: a
// Flusher, a Hijacker, io.ReaderFrom, and ResponseController's deadlines
// and full duplex through Unwrap.
func TestHTTP1WriterKeepsItsInterfaces(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config()})
	if err != nil {
		t.Fatal(err)
	}
	problems := make(chan []string, 1)
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p []string
		if _, ok := w.(http.Flusher); !ok {
			p = append(p, "no Flusher")
		}
		if _, ok := w.(http.Hijacker); !ok {
			p = append(p, "no Hijacker")
		}
		if _, ok := w.(io.ReaderFrom); !ok {
			p = append(p, "no io.ReaderFrom")
		}
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			p = append(p, "SetWriteDeadline: "+err.Error())
		}
		if err := rc.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			p = append(p, "SetReadDeadline: "+err.Error())
		}
		if err := rc.EnableFullDuplex(); err != nil {
			p = append(p, "EnableFullDuplex: "+err.Error())
		}
		if err := rc.Flush(); err != nil {
			p = append(p, "Flush: "+err.Error())
		}
		_, _ = io.Copy(w, strings.NewReader("hello"))
		problems <- p
	})))
	defer srv.Close()
	tok := api.token(t, "team-a", "client", audience, time.Hour)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello" {
		t.Errorf("GET = %d %q, want 200 hello", resp.StatusCode, body)
	}
	if p := <-problems; len(p) > 0 {
		t.Errorf("the writer behind the middleware: %s", strings.Join(p, "; "))
	}
}

// The writer next gets offers Flush and Hijack exactly where the one it
// wraps does (or one that one unwraps to, as ResponseController finds
// them), and unwraps to it.
func TestBoundWriterOffersWhatItWraps(t *testing.T) {
	type flushOnly struct {
		http.ResponseWriter
		http.Flusher
	}
	type hijackOnly struct {
		http.ResponseWriter
		http.Hijacker
	}
	type both struct {
		http.ResponseWriter
		http.Flusher
		http.Hijacker
	}
	type plain struct{ http.ResponseWriter }
	rec := httptest.NewRecorder()
	for _, tc := range []struct {
		name          string
		w             http.ResponseWriter
		flush, hijack bool
	}{
		{"plain", plain{rec}, false, false},
		{"flusher", flushOnly{rec, rec}, true, false},
		{"hijacker", hijackOnly{rec, nil}, false, true},
		{"both", both{rec, rec, nil}, true, true},
		{"a middleware's writer that unwraps to both", unwrapping{both{rec, rec, nil}}, true, true},
		{"a middleware's writer that unwraps to a plain one", unwrapping{plain{rec}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, w, stop := (&Authenticator{opts: Options{MaxRequestDuration: time.Hour, NoReview: true, now: time.Now}}).bound(context.Background(), "", User{}, tc.w)
			defer stop()
			_, flush := w.(http.Flusher)
			_, hijack := w.(http.Hijacker)
			if flush != tc.flush || hijack != tc.hijack {
				t.Errorf("Flusher %v, Hijacker %v; want %v, %v", flush, hijack, tc.flush, tc.hijack)
			}
			if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); !ok || u.Unwrap() != tc.w {
				t.Error("the writer does not unwrap to the one it wraps")
			}
		})
	}
}

// unwrapping is another middleware's writer: no method of its own but
// Unwrap.
type unwrapping struct{ w http.ResponseWriter }

func (u unwrapping) Header() http.Header         { return u.w.Header() }
func (u unwrapping) Write(p []byte) (int, error) { return u.w.Write(p) }
func (u unwrapping) WriteHeader(code int)        { u.w.WriteHeader(code) }
func (u unwrapping) Unwrap() http.ResponseWriter { return u.w }

// A handler that still asks its writer for CloseNotify (gin's
// Context.Stream asserts http.CloseNotifier and panics without it) finds
// it behind the middleware, as on the server's own writer, and hears when
// the caller leaves.
func TestWriterKeepsCloseNotify(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config()})
	if err != nil {
		t.Fatal(err)
	}
	type closeNotifier interface{ CloseNotify() <-chan bool }
	heard := make(chan string, 1)
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn, ok := w.(closeNotifier)
		if !ok {
			heard <- "no CloseNotify"
			return
		}
		gone := cn.CloseNotify()
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-gone:
			heard <- ""
		case <-time.After(testwait.Hang):
			heard <- "CloseNotify silent long after the caller left"
		}
	})))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	tok := api.token(t, "team-a", "client", audience, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err == nil {
		defer resp.Body.Close()
	}
	cancel() // the caller leaves
	if p := <-heard; p != "" {
		t.Error(p)
	}
}
