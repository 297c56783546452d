package fleet

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/authvault/authvault/internal/testkit/testpki"
)

// apiServer stands in for one cluster's API server in the scale
// benchmark: a loopback HTTP/2 TLS server with a CA of its own, which
// answers a ConfigMap list to its current bearer token and to the one
// before it (a grace for requests in flight at a rotation), and 401 to any
// other. It counts the connections it accepted and those that ended.
type apiServer struct {
	srv *httptest.Server
	ca  *testpki.CA
	id  string

	tokens   atomic.Pointer[tokenPair]
	opened   atomic.Int64 // connections accepted
	ended    atomic.Int64 // connections closed or hijacked
	rejected atomic.Int64 // requests answered 401
}

// tokenPair is an apiServer's valid tokens: the one of generation gen and
// the one before it.
type tokenPair struct {
	gen               int
	current, previous string
}

// serverLabel marks the goroutines of the loopback servers (and of their
// connections, which inherit it), so that a goroutine count can leave them
// out: the benchmark measures the client side.
const serverLabel = "authvault-bench-side"

// configMapList is every apiServer's answer: small, and what a clientset's
// List decodes.
const configMapList = `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`

// startAPIServer starts a server named id; tb's cleanup closes it.
func startAPIServer(tb testing.TB, id string) *apiServer {
	tb.Helper()
	s := &apiServer{ca: testpki.NewCA(tb), id: id}
	s.tokens.Store(&tokenPair{current: s.tokenOf(0)})
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.EnableHTTP2 = true
	s.srv.TLS = s.ca.ServerTLS(tb, id, nil)
	// A client that drops a connection mid-handshake is logged; not news.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.ended.Add(1)
		}
	}
	pprof.Do(context.Background(), pprof.Labels(serverLabel, "server"), func(context.Context) { s.srv.StartTLS() })
	tb.Cleanup(s.srv.Close)
	return s
}

func (s *apiServer) tokenOf(gen int) string {
	return "token-" + s.id + "-" + strconv.Itoa(gen)
}

// rotate makes a new token current, keeps the one it replaces valid, and
// revokes the one before; it returns the new token.
func (s *apiServer) rotate() string {
	old := s.tokens.Load()
	next := &tokenPair{gen: old.gen + 1, current: s.tokenOf(old.gen + 1), previous: old.current}
	s.tokens.Store(next) // one rotator per server: no race between Load and Store
	return next.current
}

// token returns the current token.
func (s *apiServer) token() string { return s.tokens.Load().current }

// open is the number of connections open now.
func (s *apiServer) open() int64 { return s.opened.Load() - s.ended.Load() }

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	tokens := s.tokens.Load()
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || auth == "" || (auth != tokens.current && auth != tokens.previous) {
		s.rejected.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, configMapList)
}

// clientGoroutines counts the goroutines of the process that are not the
// loopback servers'.
func clientGoroutines(tb testing.TB) int {
	tb.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		tb.Fatal(err)
	}
	// Records read "<count> @ <pcs>", then "# labels: {...}" when the
	// goroutines carry labels.
	total, server, last := 0, 0, 0
	mark := strconv.Quote(serverLabel) + ":" + strconv.Quote("server")
	for line := range strings.Lines(buf.String()) {
		switch {
		case strings.HasPrefix(line, "# labels: "):
			if strings.Contains(line, mark) {
				server += last
			}
		case line != "" && line[0] >= '0' && line[0] <= '9':
			count, _, ok := strings.Cut(line, " @ ")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(count)
			if err != nil {
				continue
			}
			total += n
			last = n
		}
	}
	return total - server
}

// TestAPIServer checks the benchmark's stand-in: the current and the
// previous token pass, older and missing ones get 401, and its goroutines
// are told from the client's.
func TestAPIServer(t *testing.T) {
	s := startAPIServer(t, "c0")
	client := s.srv.Client()
	defer client.CloseIdleConnections()
	get := func(token string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.srv.URL+"/api/v1/namespaces/default/configmaps", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	t0 := s.token()
	t1 := s.rotate()
	t2 := s.rotate()
	for _, c := range []struct {
		name, token string
		want        int
	}{
		{"current", t2, 200},
		{"previous", t1, 200},
		{"revoked", t0, 401},
		{"none", "", 401},
	} {
		if got := get(c.token); got != c.want {
			t.Errorf("%s token: got %d, want %d", c.name, got, c.want)
		}
	}
	if got, want := s.rejected.Load(), int64(2); got != want {
		t.Errorf("rejected: got %d, want %d", got, want)
	}
	if got := s.open(); got != 1 {
		t.Errorf("open connections: got %d, want 1", got)
	}
	before := clientGoroutines(t)
	extra := startAPIServer(t, "c1") // its Serve loop is a server goroutine
	if got := clientGoroutines(t); got != before {
		t.Errorf("client goroutines after starting a server: got %d, want %d", got, before)
	}
	_ = extra
}
