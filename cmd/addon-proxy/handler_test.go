package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/testkit/testwait"
)

// answerWait is how long a test waits for an answer that must come at
// once (or at a bound of a fraction of a second): a hang's bound, far
// below what a trickled body takes.
const answerWait = testwait.Hang

// sidecar serves h as the sidecar serves its callers, on a loopback
// address it returns, until the test ends.
func sidecar(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer("", h)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String()
}

// upstream is a service that counts the requests it gets and reads their
// bodies.
type upstream struct {
	*httptest.Server
	got atomic.Int64
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.got.Add(1)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d bytes over HTTP/%d", len(b), r.ProtoMajor)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) url(t *testing.T) *url.URL {
	target, err := url.Parse(u.URL)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// trickle sends the head of a POST announcing a body of which only one
// byte comes, and returns a reader of the answer.
func trickle(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte("POST /hello HTTP/1.1\r\nHost: sidecar\r\nContent-Length: 100000\r\n\r\nx")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(answerWait))
	return conn, bufio.NewReader(conn)
}

// readAnswer reads an answer and checks that the connection closes after
// it.
func readAnswer(t *testing.T, br *bufio.Reader, want int) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the body trickles: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Errorf("answer = %d, want %d", resp.StatusCode, want)
	}
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
		t.Errorf("after the answer, read = %v; want the connection closed", err)
	}
}

// The sidecar answers a caller without a token at once and closes its
// connection, however slowly its body comes.
func TestSidecarRefusesSlowBodiesAtOnce(t *testing.T) {
	auth, err := addonauth.New(addonauth.Options{Audience: "greeter.addons.svc", Config: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t)
	addr := sidecar(t, newHandler(auth.Middleware, newProxy(up.url(t), "", http.DefaultTransport, logr.Discard()), time.Minute))
	for range 5 {
		_, br := trickle(t, addr)
		readAnswer(t, br, 401)
	}
	if up.got.Load() != 0 {
		t.Error("a request without a token reached the upstream")
	}
}

// Until a request is forwarded, its connection's reads end at
// --verify-timeout: whatever answers it (a refusal that leaves the body
// unread makes net/http read it before answering) cannot be held by a
// trickled body for longer.
func TestSidecarBoundsReadsBeforeForwarding(t *testing.T) {
	refuseReadingTheBody := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "unauthorized", http.StatusUnauthorized) // no Connection: close
		})
	}
	addr := sidecar(t, newHandler(refuseReadingTheBody, http.NotFoundHandler(), 200*time.Millisecond))
	_, br := trickle(t, addr)
	readAnswer(t, br, 401)
}

// Once a verified caller's request is forwarded, its body is the
// upstream's, however long it takes: the bound ends with verification.
func TestSidecarDoesNotBoundForwardedBodies(t *testing.T) {
	up := newUpstream(t)
	addr := sidecar(t, newHandler(authMiddleware(t, addonauth.Options{}), newProxy(up.url(t), "", http.DefaultTransport, logr.Discard()), time.Second))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(answerWait))
	if _, err := conn.Write([]byte("POST /hello HTTP/1.1\r\nHost: sidecar\r\nAuthorization: Bearer " + callerToken + "\r\nContent-Length: 10\r\n\r\nhello")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // past the bound: the rest of the body comes late
	if _, err := conn.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "10 bytes over HTTP/1" {
		t.Errorf("a slow body forwarded: %d %q, want 200 with its 10 bytes", resp.StatusCode, b)
	}
}

// A request whose verification outlasts --verify-timeout is answered 503
// and not forwarded late.
func TestSidecarRefusesVerificationPastTheBound(t *testing.T) {
	up := newUpstream(t)
	slow := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(300 * time.Millisecond) // a verification slower than the bound
			next.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(newHandler(slow, newProxy(up.url(t), "", http.DefaultTransport, logr.Discard()), 100*time.Millisecond))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a verification past the bound = %d, want 503 with Retry-After", resp.StatusCode)
	}
	if up.got.Load() != 0 {
		t.Error("a request was forwarded after its verification outlasted the bound")
	}
	quick := httptest.NewServer(newHandler(func(next http.Handler) http.Handler { return next }, newProxy(up.url(t), "", http.DefaultTransport, logr.Discard()), time.Minute))
	defer quick.Close()
	resp, err = http.Post(quick.URL+"/hello", "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a verification within the bound = %d, want 200", resp.StatusCode)
	}
}

// callerToken is the one token reviewingAPI vouches for.
const callerToken = "alice-token"

// reviewingAPI is an API server that answers TokenReviews only, vouching
// for callerToken (an opaque token, so an Authenticator with
// ReviewForeign needs no issuer keys): a verified caller without a
// cluster. Its client speaks JSON, the only encoding it reads.
func reviewingAPI(t *testing.T) *rest.Config {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		if r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" || json.NewDecoder(r.Body).Decode(&tr) != nil {
			http.NotFound(w, r)
			return
		}
		if tr.Spec.Token == callerToken {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
				User: authnv1.UserInfo{Username: "alice"}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&tr)
	}))
	t.Cleanup(api.Close)
	return &rest.Config{Host: api.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
}

// authMiddleware is a real Authenticator's middleware, with its callers
// verified by reviewingAPI.
func authMiddleware(t *testing.T, opts addonauth.Options) func(http.Handler) http.Handler {
	t.Helper()
	opts.Audience, opts.Config, opts.ReviewForeign = "greeter.addons.svc", reviewingAPI(t), true
	auth, err := addonauth.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return auth.Middleware
}

// A path served unverified (--ignore-paths) keeps the bound on its
// body: its caller is anyone, and lifting the bound when it was forwarded
// let anyone hold a connection to the sidecar and one to the upstream
// for as long as it trickled its body. A verified caller's body is
// not bounded (TestSidecarDoesNotBoundForwardedBodies); nor is an ignored
// request's answer, once its body is in.
func TestSidecarBoundsIgnoredBodies(t *testing.T) {
	up := newUpstream(t)
	mw := authMiddleware(t, addonauth.Options{IgnorePaths: []string{"/hello"}})
	addr := sidecar(t, newHandler(mw, newProxy(up.url(t), "", http.DefaultTransport, logr.Discard()), 300*time.Millisecond))
	conn, br := trickle(t, addr)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while an unverified body trickles: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Errorf("a body cut short was forwarded whole: %d", resp.StatusCode)
	}
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
		t.Errorf("after the answer, read = %v; want the connection closed", err)
	}
	conn.Close()

	// A prompt body, and a slow answer, on an ignored path.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case <-time.After(time.Second): // past the bound: the answer is not bounded
		case <-r.Context().Done():
		}
		fmt.Fprintf(w, "%d bytes", len(b))
	}))
	defer slow.Close()
	target, _ := url.Parse(slow.URL)
	front := httptest.NewServer(newHandler(mw, newProxy(target, "", http.DefaultTransport, logr.Discard()), 300*time.Millisecond))
	defer front.Close()
	for _, body := range []io.Reader{nil, strings.NewReader("hello")} {
		resp, err := http.Post(front.URL+"/hello", "text/plain", body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("an ignored request answered past the bound = %d %q, want 200", resp.StatusCode, b)
		}
	}
}

// deadlines is a ResponseWriter that records the read deadlines set on it.
type deadlines struct {
	*httptest.ResponseRecorder
	set []time.Time
}

func (d *deadlines) SetReadDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

// An unverified body that ends after its handler has returned (read by a
// transport's goroutine the proxy left behind) leaves the connection's
// deadline alone: it is the next request's by then, bounded by the
// server's header and idle timeouts.
func TestSidecarLiftsNoBoundAfterTheHandler(t *testing.T) {
	var body io.Reader
	keep := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { body = r.Body })
	h := newHandler(func(next http.Handler) http.Handler { return next }, keep, time.Minute)
	w := &deadlines{ResponseRecorder: httptest.NewRecorder()}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/healthz", strings.NewReader("hello")))
	if len(w.set) != 1 || w.set[0].IsZero() {
		t.Fatalf("deadlines while the handler ran = %v, want the bound alone", w.set)
	}
	if _, err := io.ReadAll(body); err != nil {
		t.Fatal(err)
	}
	if len(w.set) != 1 {
		t.Errorf("deadlines after the handler = %v, want none set", w.set[1:])
	}
}
