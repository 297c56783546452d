package addonauth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testwait"
)

// streaming is an upstream that holds its response open until the
// request's context ends: a watch.
func streaming(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// Many streams with one token share its reviews: one per SuccessTTL
// however many hold it, and a revocation still ends every one of them.
func TestStreamRechecksShareOneReviewPerTTL(t *testing.T) {
	const (
		streams = 20
		ttl     = 200 * time.Millisecond
		window  = 10 * ttl
	)
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(streaming)))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	tok := api.token(t, "team-a", "watcher", audience, time.Hour)

	ended := make(chan struct{}, streams)
	for i := range streams {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/watch", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("watch %d = %v %v", i, resp, err)
		}
		go func() {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ended <- struct{}{}
		}()
	}
	before := api.reviews.Load()
	time.Sleep(window) // the assertion is about a count over this window
	got, limit := api.reviews.Load()-before, int64(window/ttl)+1
	if got > limit {
		t.Errorf("%d TokenReviews in %v for %d streams with one token and a SuccessTTL of %v, want at most %d",
			got, window, streams, ttl, limit)
	}
	t.Logf("%d TokenReviews in %v for %d streams with one token, SuccessTTL %v", got, window, streams, ttl)

	api.revoke(tok)
	revoked := time.Now()
	deadline := time.After(testwait.Hang)
	for i := range streams {
		select {
		case <-ended:
		case <-deadline:
			t.Fatalf("%d of %d streams outlived their token's revocation by %v", streams-i, streams, testwait.Hang)
		}
	}
	t.Logf("%d streams ended %v after the revocation (SuccessTTL %v)", streams, time.Since(revoked), ttl)
}

// clock is a settable Options.now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// boundOf is the bound behind a writer the middleware made.
func boundOf(t *testing.T, w http.ResponseWriter) *bound {
	t.Helper()
	switch w := w.(type) {
	case *boundWriter:
		return w.b
	case flushWriter:
		return w.b
	case hijackWriter:
		return w.b
	case flushHijackWriter:
		return w.b
	}
	t.Fatalf("%T is not the middleware's writer", w)
	return nil
}

// A stream's periodic check trusts a verdict asked after its last check,
// whoever asked it (another stream, a new request), and never one asked
// before: not the cached verdict the stream began with (then a revocation
// would keep access for two SuccessTTLs), nor the one it relied on last.
func TestStreamRecheckTrustsOnlyNewerVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name string
		// between makes what happens after the stream began, before the
		// token is revoked and the stream checks it.
		between     func(t *testing.T, s *setup, clk *clock, tok string, other *bound)
		wantEnded   bool
		wantReviews int64 // in all
	}{
		{"the cached verdict it began with", func(*testing.T, *setup, *clock, string, *bound) {}, true, 2},
		{"a verdict asked for another stream", func(_ *testing.T, _ *setup, _ *clock, _ string, other *bound) { other.review() }, false, 2},
		{"a verdict asked for a new request", func(t *testing.T, s *setup, clk *clock, tok string, _ *bound) {
			clk.add(2 * time.Hour) // the first verdict is stale: the request asks
			if _, err := s.auth.Authenticate(context.Background(), tok); err != nil {
				t.Fatal(err)
			}
		}, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: time.Now()}
			// SuccessTTL is an hour of the real clock: the test calls the
			// checks; the fake clock ages the verdicts.
			s := newSetup(t, Options{SuccessTTL: time.Hour, now: clk.now})
			tok := s.api.token(t, "team-a", "watcher", audience, 24*time.Hour)
			u, err := s.auth.Authenticate(context.Background(), tok)
			if err != nil {
				t.Fatal(err)
			}
			ctx, w, stop := s.auth.bound(context.Background(), "Bearer "+tok, u, httptest.NewRecorder())
			defer stop()
			_, otherW, otherStop := s.auth.bound(context.Background(), "Bearer "+tok, u, httptest.NewRecorder())
			defer otherStop()
			tc.between(t, s, clk, tok, boundOf(t, otherW))
			s.api.revoke(tok)
			boundOf(t, w).review()
			if got := ctx.Err() != nil; got != tc.wantEnded {
				t.Errorf("stream ended: %v, want %v", got, tc.wantEnded)
			}
			if got := s.api.reviews.Load(); got != tc.wantReviews {
				t.Errorf("%d TokenReviews, want %d", got, tc.wantReviews)
			}
			if !tc.wantEnded {
				// The verdict it relied on is not news the next time.
				boundOf(t, w).review()
				if ctx.Err() == nil {
					t.Error("the stream's next check trusted the verdict it relied on last: the revocation is not seen")
				}
			}
		})
	}
}

// Streams that check one token at the same moment cost one review.
func TestConcurrentStreamRechecksShareOneReview(t *testing.T) {
	s := newSetup(t, Options{SuccessTTL: time.Hour})
	tok := s.api.token(t, "team-a", "watcher", audience, 2*time.Hour)
	u, err := s.auth.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	var bounds []*bound
	for range 20 {
		_, w, stop := s.auth.bound(context.Background(), "Bearer "+tok, u, httptest.NewRecorder())
		defer stop()
		bounds = append(bounds, boundOf(t, w))
	}
	var wg sync.WaitGroup
	for _, b := range bounds {
		wg.Go(b.review)
	}
	wg.Wait()
	if got := s.api.reviews.Load(); got != 2 {
		t.Errorf("%d TokenReviews for the first request and 20 streams' checks, want 2", got)
	}
}

// eventually waits for cond, a hang's worth of time at most.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, cond)
}

// released tells whether b's timers are stopped and it checks no more.
func released(b *bound) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		return false
	}
	// Stop reports whether it stopped the timer: false once stopped.
	return (b.recheck == nil || !b.recheck.Stop()) && (b.expire == nil || !b.expire.Stop())
}

// A request that returns releases its bound: no timer left, no review
// after it. So does a hijacked connection its handler closes, twice even.
func TestBoundsAreReleased(t *testing.T) {
	const ttl = 50 * time.Millisecond
	for _, tc := range []struct {
		name    string
		handler func(w http.ResponseWriter, r *http.Request)
	}{
		{"ordinary request", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") }},
		{"hijacked, closed by the handler", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("Hijack: %v", err)
				return
			}
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
			if err := conn.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			_ = conn.Close() // a second Close is harmless
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t)
			a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			bounds := make(chan *bound, 1)
			srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				bounds <- boundOf(t, w)
				tc.handler(w, r)
			})))
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			tok := api.token(t, "team-a", "client", audience, time.Hour)
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "hello" {
				t.Fatalf("GET = %d %q, want hello", resp.StatusCode, body)
			}
			b := <-bounds
			eventually(t, "the bound released", func() bool { return released(b) })
			reviews := api.reviews.Load()
			time.Sleep(5 * ttl) // the assertion is about a count over this time
			if got := api.reviews.Load(); got != reviews {
				t.Errorf("%d TokenReviews after the request was over, want none", got-reviews)
			}
		})
	}
}

// A long request let in on a cached verdict is checked again when that
// verdict lapses, not a whole SuccessTTL after the request began: a stream
// started just before its token's verdict lapsed kept a revoked token's
// access for nearly two SuccessTTLs.
func TestStreamLetInOnACachedVerdictIsCheckedWhenItLapses(t *testing.T) {
	const ttl = 30 * time.Second
	clk := newManualClock()
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: ttl, now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(streaming)))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	tok := api.token(t, "team-a", "watcher", audience, time.Hour)
	if _, err := a.Authenticate(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	api.revoke(tok)
	clk.advance(ttl - 100*time.Millisecond) // the verdict has 100 ms left
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/watch", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch on the cached verdict = %v %v, want 200", resp, err)
	}
	defer resp.Body.Close()
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(ended) }()
	select {
	case <-ended:
	case <-time.After(ttl / 2):
		t.Fatalf("the stream outlived the verdict it was let in on (100 ms left) by %v: its token was revoked before", ttl/2)
	}
}

// A negative MaxRequestDuration means none, as every negative duration in
// Options does: requests end with their token, not at once.
func TestNoMaxRequestDuration(t *testing.T) {
	s := newSetup(t, Options{MaxRequestDuration: -1})
	tok := s.api.token(t, "team-a", "watcher", audience, time.Hour)
	u, err := s.auth.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	ctx, _, stop := s.auth.bound(context.Background(), "Bearer "+tok, u, httptest.NewRecorder())
	defer stop()
	if err := ctx.Err(); err != nil {
		t.Errorf("a request's context without MaxRequestDuration: %v at once, want it to last", err)
	}
	if d, ok := ctx.Deadline(); !ok || !d.Equal(u.Expires) {
		t.Errorf("deadline %v (%v), want the token's expiry %v", d, ok, u.Expires)
	}
	opaque := newSetup(t, Options{MaxRequestDuration: -1, NoReview: true})
	ctx, _, stop = opaque.auth.bound(context.Background(), "", User{}, httptest.NewRecorder())
	defer stop()
	if _, ok := ctx.Deadline(); ok || ctx.Err() != nil {
		t.Errorf("with neither a maximum nor an expiry: deadline %v, error %v; want none", ok, ctx.Err())
	}
}

// With SuccessTTL none (negative: no verdict is trusted past its request),
// a long request is still reviewed again, every second: it was never
// checked, and a revoked token kept its stream to its expiry.
func TestStreamWithoutSuccessTTLEndsWhenRevoked(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(streaming)))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	tok := api.token(t, "team-a", "watcher", audience, time.Hour)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/watch", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch = %v %v", resp, err)
	}
	defer resp.Body.Close()
	api.revoke(tok)
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(ended) }()
	select {
	case <-ended:
	case <-time.After(15 * time.Second):
		t.Fatal("the stream outlived its token's revocation by 15 s")
	}
}
