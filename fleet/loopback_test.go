package fleet

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
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
	"time"

	"github.com/authvault/authvault/testkit/testpki"
)

// loopbackServer stands in for one cluster's API server in the scale
// benchmark: a loopback HTTP/2 TLS server with a CA of its own, which
// answers a ConfigMap list to its current credential and to the one before
// it (a grace for requests in flight at a rotation), and 401 to any other.
// A credential is a bearer token, or a client certificate from the
// server's CA whose common name is the credential's name. It counts the
// connections it accepted and those that ended.
type loopbackServer struct {
	srv *httptest.Server
	ca  *testpki.CA
	id  string

	creds    atomic.Pointer[credPair]
	opened   atomic.Int64 // connections accepted
	ended    atomic.Int64 // connections closed or hijacked
	lastEnd  atomic.Int64 // when the last one ended, in Unix nanoseconds
	rejected atomic.Int64 // requests answered 401
	resumed  atomic.Int64 // TLS handshakes that resumed a session
}

// credPair is an loopbackServer's valid credentials: the current one, of
// generation gen, and the name of the one before it.
type credPair struct {
	gen      int
	current  *material
	previous string
}

// material is one credential: a token (name itself), or a client
// certificate and its key issued for name.
type material struct {
	name      string
	cert, key []byte
}

// serverLabel marks the goroutines of the loopback servers (and of their
// connections, which inherit it) with the server's id, so that a goroutine
// count can leave them out: the benchmark measures the client side.
const serverLabel = "authvault-bench-side"

// configMapList is every loopbackServer's answer: small, and what a clientset's
// List decodes.
const configMapList = `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`

// startLoopback starts a server named id whose first credential is a
// token, or a client certificate when certs is set; tb's cleanup closes it.
func startLoopback(tb testing.TB, id string, certs bool) *loopbackServer {
	tb.Helper()
	s := &loopbackServer{ca: testpki.NewCA(tb), id: id}
	s.creds.Store(&credPair{current: s.issue(tb, 0, certs)})
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.EnableHTTP2 = true
	s.srv.TLS = s.ca.ServerTLS(tb, id, s.ca) // client certificates verified when given
	// Called after every handshake, a resumed one included.
	s.srv.TLS.VerifyConnection = func(cs tls.ConnectionState) error {
		if cs.DidResume {
			s.resumed.Add(1)
		}
		return nil
	}
	// A client that drops a connection mid-handshake is logged; not news.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.lastEnd.Store(time.Now().UnixNano())
			s.ended.Add(1)
		}
	}
	pprof.Do(context.Background(), pprof.Labels(serverLabel, id), func(context.Context) { s.srv.StartTLS() })
	tb.Cleanup(s.srv.Close)
	return s
}

// issue makes the credential of generation gen.
func (s *loopbackServer) issue(tb testing.TB, gen int, cert bool) *material {
	m := &material{name: "cred-" + s.id + "-" + strconv.Itoa(gen)}
	if cert {
		m.cert, m.key = s.ca.Issue(tb, m.name, false)
	}
	return m
}

// rotate makes a new credential current (a client certificate if the
// current one is), keeps the one it replaces valid, revokes the one
// before, and returns the new one. Only one goroutine may rotate a server.
func (s *loopbackServer) rotate(tb testing.TB) *material {
	old := s.creds.Load()
	next := &credPair{gen: old.gen + 1, current: s.issue(tb, old.gen+1, old.current.cert != nil), previous: old.current.name}
	s.creds.Store(next)
	return next.current
}

// current returns the current credential.
func (s *loopbackServer) current() *material { return s.creds.Load().current }

// open is the number of connections open now.
func (s *loopbackServer) open() int64 { return s.opened.Load() - s.ended.Load() }

func (s *loopbackServer) serve(w http.ResponseWriter, r *http.Request) {
	creds := s.creds.Load()
	name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		name, ok = r.TLS.PeerCertificates[0].Subject.CommonName, true
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok || name == "" || (name != creds.current.name && name != creds.previous) {
		s.rejected.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`)
		return
	}
	_, _ = io.WriteString(w, configMapList)
}

// clientGoroutines counts the goroutines of the process that are not the
// loopback servers'.
func clientGoroutines(tb testing.TB) int {
	client, _ := goroutines(tb)
	return client
}

// goroutines counts the goroutines of the process that are not the
// loopback servers', and those of each server by its id.
func goroutines(tb testing.TB) (client int, servers map[string]int) {
	tb.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		tb.Fatal(err)
	}
	// Records read "<count> @ <pcs>", then `# labels: {"key":"value", ...}`
	// when the goroutines carry labels.
	servers = map[string]int{}
	mark := strconv.Quote(serverLabel) + ":"
	last := 0
	for line := range strings.Lines(buf.String()) {
		if rest, ok := strings.CutPrefix(line, "# labels: "); ok {
			if _, after, ok := strings.Cut(rest, mark); ok {
				if quoted, err := strconv.QuotedPrefix(after); err == nil {
					id, _ := strconv.Unquote(quoted)
					servers[id] += last
					client -= last
				}
			}
			continue
		}
		count, _, ok := strings.Cut(line, " @ ")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(count); err == nil {
			client += n
			last = n
		}
	}
	return client, servers
}

// TestLoopbackServer checks the benchmark's stand-in: the current and the
// previous credential pass, older and missing ones get 401, and its
// goroutines are told from the client's.
func TestLoopbackServer(t *testing.T) {
	for _, certs := range []bool{false, true} {
		t.Run(fmt.Sprint("certs=", certs), func(t *testing.T) {
			s := startLoopback(t, "c0", certs)
			get := func(m *material) int {
				t.Helper()
				tr := s.srv.Client().Transport.(*http.Transport).Clone()
				defer tr.CloseIdleConnections()
				req, err := http.NewRequest(http.MethodGet, s.srv.URL+"/api/v1/namespaces/default/configmaps", nil)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case m == nil:
				case m.cert != nil:
					pair, err := tls.X509KeyPair(m.cert, m.key)
					if err != nil {
						t.Fatal(err)
					}
					tr.TLSClientConfig.Certificates = []tls.Certificate{pair}
				default:
					req.Header.Set("Authorization", "Bearer "+m.name)
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			m0 := s.current()
			m1 := s.rotate(t)
			m2 := s.rotate(t)
			if got, want := m2.cert != nil, certs; got != want {
				t.Errorf("rotated to a certificate: got %t, want %t", got, want)
			}
			for _, c := range []struct {
				name string
				m    *material
				want int
			}{
				{"current", m2, 200},
				{"previous", m1, 200},
				{"revoked", m0, 401},
				{"none", nil, 401},
			} {
				if got := get(c.m); got != c.want {
					t.Errorf("%s credential: got %d, want %d", c.name, got, c.want)
				}
			}
			if got, want := s.rejected.Load(), int64(2); got != want {
				t.Errorf("rejected: got %d, want %d", got, want)
			}
			if got, want := s.opened.Load(), int64(4); got != want {
				t.Errorf("connections: got %d, want %d", got, want)
			}
			// A new server's Serve loop is its own. (Not checked: that the
			// client's count stays, which connections still ending and
			// timers firing move.)
			startLoopback(t, "c1", certs)
			if _, servers := goroutines(t); servers["c1"] != 1 {
				t.Errorf("goroutines of a server without connections: got %d, want 1", servers["c1"])
			}
		})
	}
}
