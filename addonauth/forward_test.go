package addonauth

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testwait"
)

// A caller cannot make a reverse proxy behind the middleware (the sidecar's)
// drop the identity it set by naming those headers in Connection: the
// upstream would see an authenticated request without its user or groups.
func TestConnectionCannotDropTheIdentityBehindAProxy(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config()})
	if err != nil {
		t.Fatal(err)
	}
	up := &recorder{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	target, _ := url.Parse(upstream.URL)
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }}
	srv := httptest.NewServer(a.Middleware(proxy))
	defer srv.Close()

	tok := api.token(t, "team-a", "client", audience, time.Hour)
	for _, conn := range []string{
		"X-Authenticated-User, X-Authenticated-Groups, X-Authenticated-UID",
		"keep-alive, x-authenticated-user",
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/hello", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Connection", conn)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("Connection: %s: GET = %d, want 200", conn, resp.StatusCode)
		}
		up.mu.Lock()
		h := up.seen[len(up.seen)-1]
		up.mu.Unlock()
		if got, want := h.Get("X-Authenticated-User"), "system:serviceaccount:team-a:client"; got != want {
			t.Errorf("Connection: %s: the upstream saw X-Authenticated-User %q, want %q", conn, got, want)
		}
		if got := h.Values("X-Authenticated-Groups"); len(got) != 3 {
			t.Errorf("Connection: %s: the upstream saw groups %v, want the caller's 3", conn, got)
		}
	}
}

// Servers that map header names to variables (CGI, WSGI, Rack, PHP) read
// X_Authenticated_User as X-Authenticated-User: an underscore spelling is
// a spoofed identity too.
func TestUnderscoreSpellingsOfIdentityHeadersNeverReachTheUpstream(t *testing.T) {
	s := newSetup(t, Options{})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	resp, _ := s.get(t, tok, http.Header{
		"X_Authenticated_User":   {"admin"},
		"X_authenticated_groups": {"system:masters"},
		"X-Remote_User":          {"admin"},
	})
	if resp.StatusCode != 200 {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	for name, values := range s.up.seen[0] {
		for _, v := range values {
			if v == "admin" || v == "system:masters" {
				t.Errorf("spoofed %s: %s reached the upstream", name, v)
			}
		}
	}
}

// The User an upstream gets is its own: changing its groups changes no
// other request's.
func TestUserGroupsAreEachRequestsOwn(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen [][]string
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := UserFrom(r.Context())
		mu.Lock()
		seen = append(seen, append([]string(nil), u.Groups...))
		mu.Unlock()
		u.Groups[0] = "system:masters" // an upstream that edits what it was given
	})))
	defer srv.Close()
	tok := api.token(t, "team-a", "client", audience, 2*time.Hour)
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(seen) != 2 || seen[1][0] != "system:serviceaccounts" {
		t.Errorf("groups seen = %v, want the second request's to be the caller's (system:serviceaccounts first)", seen)
	}
	u, err := a.Authenticate(t.Context(), tok)
	if err != nil || u.Groups[0] != "system:serviceaccounts" {
		t.Errorf("Authenticate after an upstream edited its User = %v, %v", u.Groups, err)
	}
}

// A stream whose token can no longer be vouched for ends as a new request
// with the token would be refused: past StaleIfError of an API outage, a
// revocation made just before it must not keep access for MaxRequestDuration.
func TestStreamsEndPastTheStaleBoundOfAnOutage(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: 100 * time.Millisecond, StaleIfError: 300 * time.Millisecond, ReviewTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})))
	defer srv.Close()
	tok := api.token(t, "team-a", "watcher", audience, time.Hour)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/watch", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch = %v %v", resp, err)
	}
	defer resp.Body.Close()
	api.setDown(true)
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(done) }()
	select {
	case <-done:
	case <-time.After(testwait.Hang): // it ends past StaleIfError (300 ms); kept, it would last MaxRequestDuration (1 h)
		t.Fatalf("the stream outlived the stale bound of an outage by %v", testwait.Hang)
	}
}

// A request that missed the cache just before another's review of the same
// token landed in it asks no second review: the flight looks at the cache
// first (TestOneReviewPerTokenAndTTL failed on a loaded machine this way).
func TestAReviewThatJustLandedIsNotAskedAgain(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config(), SuccessTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tok := api.token(t, "team-a", "client", audience, 2*time.Hour)
	if _, err := a.Authenticate(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	local, _, err := a.verifyLocal(t.Context(), tok) // the late request's local check
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.reviewer.review(t.Context(), tok, local); err != nil {
		t.Fatal(err)
	}
	if n := api.reviews.Load(); n != 1 {
		t.Errorf("%d TokenReviews, want 1: the first answer was fresh in the cache", n)
	}
}

// Trailers are headers too: an upstream in the same process reads
// r.Trailer once it has read the body, and a caller must not claim an
// identity there, declared or not, nor make a proxy behind the middleware
// expect one by naming it in Trailer.
func TestIdentityTrailersNeverReachTheUpstream(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config()})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		header, trailer http.Header
		body            string
	}
	got := make(chan seen, 2)
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Header.Clone(), r.Trailer.Clone(), string(b)}
	})))
	defer srv.Close()
	tok := api.token(t, "team-a", "client", audience, time.Hour)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /hello HTTP/1.1\r\nHost: upstream\r\nAuthorization: Bearer %s\r\n"+
		"Transfer-Encoding: chunked\r\nTrailer: X-Authenticated-User, X-Remote-Group, X-Checksum\r\nTrailer: X_Authenticated_Uid\r\n\r\n"+
		"5\r\nhello\r\n0\r\nX-Authenticated-User: admin\r\nX-Remote-Group: system:masters\r\nX_Authenticated_Uid: 0\r\n"+
		"X-Authenticated-Groups: system:masters\r\nX-Checksum: abc\r\n\r\n", tok)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := <-got
	if s.body != "hello" || s.trailer.Get("X-Checksum") != "abc" {
		t.Errorf("the upstream read %q with trailers %v, want hello and the checksum", s.body, s.trailer)
	}
	for name, values := range s.trailer {
		if a.isIdentityHeader(name) {
			t.Errorf("the trailer %s: %v reached the upstream", name, values)
		}
	}

	// Undeclared trailers never reach a copy of the request.
	fmt.Fprintf(conn, "POST /hello HTTP/1.1\r\nHost: upstream\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\n0\r\nX-Authenticated-User: admin\r\n\r\n", tok)
	if resp, err = http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s = <-got; s.body != "hello" || len(s.trailer) != 0 {
		t.Errorf("undeclared trailers: the upstream read %q with trailers %v, want hello and none", s.body, s.trailer)
	}

	// Without chunking, Trailer stays a header: the names it declares
	// must not include identity headers either.
	fmt.Fprintf(conn, "POST /hello HTTP/1.1\r\nHost: upstream\r\nAuthorization: Bearer %s\r\nContent-Length: 5\r\n"+
		"Trailer: X-Authenticated-User, X-Checksum\r\nTrailer: x_remote_user\r\n\r\nhello", tok)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s = <-got
	if got, want := s.header.Values("Trailer"), []string{"X-Checksum"}; !slices.Equal(got, want) {
		t.Errorf("the upstream saw Trailer %q, want %q", got, want)
	}
}

// An upstream that closes the body unread, and then looks at the
// trailers, sees no identity among them either: net/http's Close reads
// the rest of a small body, trailers included, without a Read of the
// middleware's seeing its end.
func TestIdentityTrailersNeverReachAnUpstreamThatClosesTheBody(t *testing.T) {
	api := newFakeAPI(t)
	a, err := New(Options{Audience: audience, Config: api.config()})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.Body.Close()
		got <- r.Trailer.Clone()
	})))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /hello HTTP/1.1\r\nHost: upstream\r\nAuthorization: Bearer %s\r\n"+
		"Transfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"+
		"5\r\nhello\r\n0\r\nX-Authenticated-User: admin\r\nX-Checksum: abc\r\n\r\n", api.token(t, "team-a", "client", audience, time.Hour))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	trailer := <-got
	for name, values := range trailer {
		if a.isIdentityHeader(name) {
			t.Errorf("the trailer %s: %v reached the upstream", name, values)
		}
	}
}
