package vault

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/authvault/authvault/testkit/testpki"
)

// Paths a streamServer serves upgrades on, and what its exec prints.
const (
	execPath        = "/api/v1/namespaces/default/pods/web/exec"
	portForwardPath = "/api/v1/namespaces/default/pods/web/portforward"
	// redirectPath answers an authenticated upgrade with a 302 to its
	// query's "to".
	redirectPath = "/redirect"
	execOutput   = "hello from the pod\n"
	// markerHeader is what a test's own round tripper adds, so that the
	// server shows which requests went through it.
	markerHeader = "X-Test-Wrapper"
)

// upgradeKind is the protocol a request asks to upgrade to, "" for none.
type upgradeKind string

const (
	notUpgrade       upgradeKind = ""
	spdyUpgrade      upgradeKind = "spdy"
	webSocketUpgrade upgradeKind = "websocket"
)

// hit is one request as a streamServer saw it.
type hit struct {
	Kind    upgradeKind
	Path    string
	Auth    string // the Authorization header
	CertCN  string // of the verified client certificate, "" when none
	Marker  string // markerHeader
	Resumed bool   // the TLS handshake resumed an earlier session
	// Status is the answer: 101 for an upgrade the server took.
	Status int
}

// streamServer is an API server that also takes the upgrades of exec and
// port-forward as kube-apiserver and the kubelet behind it do: exec over
// SPDY (remotecommand v4.channel.k8s.io) and WebSocket (v5.channel.k8s.io),
// port-forward over SPDY (portforward.k8s.io, echoing every data stream).
// It authenticates upgrades as apiServer does its requests (token, basic,
// client certificate; 401 otherwise), serves ordinary requests through
// apiServer, and records every request, every TLS handshake, and the head
// of every plain-text request that reaches its TLS port.
type streamServer struct {
	*apiServer

	// noWebSocket answers WebSocket upgrades 400, as a server that only
	// speaks SPDY.
	noWebSocket atomic.Bool
	// stall401 answers a refused upgrade with the head of a 401 and part of
	// its body, and never the rest: the connection stays open until close.
	stall401 atomic.Bool
	// echo401 has a refused upgrade's answer quote its Authorization
	// header, in its body, as a gateway's "token … is revoked".
	echo401 atomic.Bool
	// rotated, once set, is the TLS configuration every handshake uses
	// from then on: a certificate from another CA, other ticket keys.
	rotated atomic.Pointer[tls.Config]
	// upgrades counts the handlers of upgraded connections; Cleanup waits
	// for them.
	upgrades sync.WaitGroup

	mu           sync.Mutex // guards the fields below
	hits         []hit
	hellos       int                // TLS ClientHellos received
	handshakeCNs []string           // client certificates that completed a handshake
	plain        []string           // heads of plain-text requests sent to the TLS port
	held         map[io.Closer]bool // upgraded connections, closed by Cleanup
	clientCA     *testpki.CA        // verifies client certificates; for rotateCA
	verify       func(tls.ConnectionState) error
}

// newStreamServer starts a TLS server with a certificate from ca for the
// name "api" and loopback, which verifies client certificates from clientCA
// when that is set.
func newStreamServer(t *testing.T, ca, clientCA *testpki.CA) *streamServer {
	t.Helper()
	s := unstartedStreamServer(t)
	s.clientCA = clientCA
	cfg := ca.ServerTLS(t, "api", clientCA)
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		s.mu.Lock()
		s.hellos++
		s.mu.Unlock()
		return s.rotated.Load(), nil // nil: this configuration
	}
	cfg.VerifyConnection = s.verify
	s.srv.TLS = cfg
	s.srv.EnableHTTP2 = true // ordinary requests as kube-apiserver serves them
	s.srv.StartTLS()
	return s
}

// newPlainStreamServer starts a server without TLS.
func newPlainStreamServer(t *testing.T) *streamServer {
	t.Helper()
	s := unstartedStreamServer(t)
	s.srv.Start()
	return s
}

func unstartedStreamServer(t *testing.T) *streamServer {
	t.Helper()
	s := &streamServer{
		apiServer: &apiServer{tokens: map[string]bool{}, served: map[string]int{}, basic: map[string]string{}, certCNs: map[string]bool{}},
		held:      map[io.Closer]bool{},
	}
	s.verify = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) > 0 {
			s.mu.Lock()
			s.handshakeCNs = append(s.handshakeCNs, cs.PeerCertificates[0].Subject.CommonName)
			s.mu.Unlock()
		}
		return nil
	}
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes that tests make fail
	s.srv.Listener = &tapListener{Listener: s.srv.Listener, s: s}
	t.Cleanup(s.close)
	return s
}

// close stops the server, ends its upgraded connections and waits for
// their handlers: httptest does not wait for hijacked connections.
func (s *streamServer) close() {
	s.srv.Close() // no new handler; those before a hijack have returned
	s.mu.Lock()
	for c := range s.held {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.upgrades.Wait()
}

// rotateCA makes the server present a certificate from ca from now on,
// with new session ticket keys, as an API server whose CA rotated: a
// client that trusts only the old CA cannot resume its way past the new
// certificate.
func (s *streamServer) rotateCA(t *testing.T, ca *testpki.CA) {
	t.Helper()
	cfg := ca.ServerTLS(t, "api", s.clientCA)
	cfg.VerifyConnection = s.verify
	var key [32]byte
	_, _ = rand.Read(key[:])
	cfg.SetSessionTicketKeys([][32]byte{key})
	s.rotated.Store(cfg)
}

// seenHits returns the requests so far; upgrades only when upgradesOnly.
func (s *streamServer) seenHits(upgradesOnly bool) []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []hit
	for _, h := range s.hits {
		if !upgradesOnly || h.Kind != notUpgrade {
			out = append(out, h)
		}
	}
	return out
}

// upgrades401 counts the upgrades the server answered with 401.
func (s *streamServer) upgrades401() int {
	n := 0
	for _, h := range s.seenHits(true) {
		if h.Status == http.StatusUnauthorized {
			n++
		}
	}
	return n
}

// tlsSeen returns how many ClientHellos the server received and the client
// certificates of the handshakes that completed.
func (s *streamServer) tlsSeen() (hellos int, certCNs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hellos, append([]string(nil), s.handshakeCNs...)
}

// plainHeads returns the heads of the plain-text requests sent to the TLS port.
func (s *streamServer) plainHeads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.plain...)
}

func (s *streamServer) record(h hit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hits = append(s.hits, h)
}

// hold keeps c for close; release forgets it.
func (s *streamServer) hold(c io.Closer) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[c] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.held, c)
	}
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := hit{
		Kind: kindOf(r), Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Marker: r.Header.Get(markerHeader),
	}
	if r.TLS != nil {
		h.Resumed = r.TLS.DidResume
		if len(r.TLS.VerifiedChains) > 0 {
			h.CertCN = r.TLS.VerifiedChains[0][0].Subject.CommonName
		}
	}
	if h.Kind == notUpgrade {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		s.serve(rec, r)
		h.Status = rec.status
		s.record(h)
		return
	}

	var ignored seen
	user := s.authenticate(r, &ignored)
	switch {
	case user == "":
		h.Status = http.StatusUnauthorized
	case r.URL.Path == redirectPath:
		h.Status = http.StatusFound
	case h.Kind == webSocketUpgrade && s.noWebSocket.Load():
		h.Status = http.StatusBadRequest
	default:
		h.Status = http.StatusSwitchingProtocols
	}
	s.record(h) // before the upgrade: a test reads it once its stream is done

	switch {
	case h.Status == http.StatusUnauthorized && s.stall401.Load():
		s.stallRefusal(w)
		return
	case h.Status == http.StatusUnauthorized:
		message := "Unauthorized"
		if s.echo401.Load() {
			message = "token " + strings.TrimPrefix(h.Auth, "Bearer ") + " is revoked"
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", `Bearer realm="test-api"`)
		w.WriteHeader(http.StatusUnauthorized)
		status, _ := json.Marshal(metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Message: message, Reason: metav1.StatusReasonUnauthorized, Code: http.StatusUnauthorized,
		})
		_, _ = w.Write(status)
		return
	case h.Status == http.StatusFound:
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		return
	case h.Status == http.StatusBadRequest:
		http.Error(w, "this server takes no WebSocket upgrades", http.StatusBadRequest)
		return
	}
	s.upgrades.Add(1)
	defer s.upgrades.Done()
	switch {
	case h.Kind == spdyUpgrade && r.URL.Path == execPath:
		s.execSPDY(w, r)
	case h.Kind == spdyUpgrade && r.URL.Path == portForwardPath:
		s.portForwardSPDY(w, r)
	case h.Kind == webSocketUpgrade && r.URL.Path == execPath:
		s.execWebSocket(w, r)
	default:
		http.NotFound(w, r)
	}
}

// stallRefusal writes the head of a 401 that promises a body, and a
// little of it, and holds the connection until close.
func (s *streamServer) stallRefusal(w http.ResponseWriter) {
	s.upgrades.Add(1)
	defer s.upgrades.Done()
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer s.hold(c)()
	defer c.Close()
	_, _ = io.WriteString(c, "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nContent-Length: 65536\r\n\r\nUnauth")
	_, _ = c.Read(make([]byte, 1)) // until the client or close ends it
}

// kindOf tells what r asks to upgrade to.
func kindOf(r *http.Request) upgradeKind {
	if !httpstream.IsUpgradeRequest(r) {
		return notUpgrade
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return webSocketUpgrade
	}
	return spdyUpgrade
}

// execSPDY runs a command the way the kubelet answers exec over SPDY: it
// takes the client's error and stdout streams, writes the command's output
// on stdout, reports success on the error stream, and keeps the connection
// until the client closes it.
func (s *streamServer) execSPDY(w http.ResponseWriter, r *http.Request) {
	if _, err := httpstream.Handshake(r, w, []string{remotecommand.StreamProtocolV4Name}); err != nil {
		return // Handshake answered
	}
	type arrival struct {
		httpstream.Stream
		replySent <-chan struct{}
	}
	arrived := make(chan arrival, 8) // exec opens at most five streams
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(st httpstream.Stream, replySent <-chan struct{}) error {
		select {
		case arrived <- arrival{st, replySent}:
			return nil
		default:
			return fmt.Errorf("unexpected stream %s", st.Headers().Get(v1.StreamType))
		}
	})
	if conn == nil {
		return // UpgradeResponse answered
	}
	defer s.hold(conn)()
	defer conn.Close()

	var stdout, errStream httpstream.Stream
	for stdout == nil || errStream == nil {
		select {
		case a := <-arrived:
			select {
			case <-a.replySent:
			case <-conn.CloseChan():
				return
			}
			switch a.Headers().Get(v1.StreamType) {
			case v1.StreamTypeStdout:
				stdout = a.Stream
			case v1.StreamTypeError:
				errStream = a.Stream
			}
		case <-conn.CloseChan():
			return
		}
	}
	_, _ = io.WriteString(stdout, execOutput)
	_ = stdout.Close()
	_ = json.NewEncoder(errStream).Encode(metav1.Status{Status: metav1.StatusSuccess})
	_ = errStream.Close()
	<-conn.CloseChan()
}

// portForwardSPDY forwards a port the way the kubelet answers port-forward
// over SPDY, to a peer that echoes: for each request ID, the client opens
// an error stream and a data stream; the data comes back on the data
// stream until the client closes its side, then both streams close with
// no error written.
func (s *streamServer) portForwardSPDY(w http.ResponseWriter, r *http.Request) {
	if _, err := httpstream.Handshake(r, w, []string{portforward.PortForwardProtocolV1Name}); err != nil {
		return
	}
	var (
		mu        sync.Mutex // guards errorsOf and ended
		errorsOf  = map[string]httpstream.Stream{}
		ended     bool // no echo starts once the connection is done
		echoes    sync.WaitGroup
		newStream = func(st httpstream.Stream, replySent <-chan struct{}) error {
			id := st.Headers().Get(v1.PortForwardRequestIDHeader)
			mu.Lock()
			defer mu.Unlock()
			if ended {
				return fmt.Errorf("connection closed")
			}
			switch st.Headers().Get(v1.StreamType) {
			case v1.StreamTypeError:
				errorsOf[id] = st
			case v1.StreamTypeData:
				echoes.Add(1)
				go func() {
					defer echoes.Done()
					<-replySent
					_, _ = io.Copy(st, st)
					_ = st.Close()
					mu.Lock()
					e := errorsOf[id]
					delete(errorsOf, id)
					mu.Unlock()
					if e != nil {
						_ = e.Close()
					}
				}()
			default:
				return fmt.Errorf("unexpected stream type %q", st.Headers().Get(v1.StreamType))
			}
			return nil
		}
	)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, newStream)
	if conn == nil {
		return
	}
	defer s.hold(conn)()
	<-conn.CloseChan()
	mu.Lock()
	ended = true
	mu.Unlock()
	_ = conn.Close()
	echoes.Wait()
}

// execWebSocket runs a command the way kube-apiserver answers exec over
// WebSocket (v5): binary messages prefixed with their channel, the output
// on stdout (1), success on the error channel (3), then a normal close.
func (s *streamServer) execWebSocket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{
		Subprotocols: []string{remotecommand.StreamProtocolV5Name},
		CheckOrigin:  func(*http.Request) bool { return true },
	}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade answered
	}
	defer s.hold(c)()
	defer c.Close()
	status, _ := json.Marshal(metav1.Status{Status: metav1.StatusSuccess})
	for _, msg := range [][]byte{
		append([]byte{remotecommand.StreamStdOut}, execOutput...),
		append([]byte{remotecommand.StreamErr}, status...),
	} {
		if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
			return
		}
	}
	_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Minute))
	for { // until the client answers the close, or close ends it
		if _, _, err := c.NextReader(); err != nil {
			return
		}
	}
}

// statusRecorder keeps the status of an ordinary response.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() { r.ResponseWriter.(http.Flusher).Flush() }

// tapListener records the head of each plain-text request that reaches a
// TLS port, which the TLS layer would only refuse: what a client sent in
// clear text is what an eavesdropper reads.
type tapListener struct {
	net.Listener
	s *streamServer
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, s: l.s}, nil
}

// tapConn reads, on its first Read, the whole head of a plain-text request
// (one not starting with a TLS handshake record), records it, and hands
// what it read to the reader.
type tapConn struct {
	net.Conn
	s       *streamServer
	sniffed bool
	pending []byte
}

// tlsHandshakeRecord is the first byte of a TLS connection.
const tlsHandshakeRecord = 0x16

func (c *tapConn) Read(p []byte) (int, error) {
	if !c.sniffed {
		c.sniffed = true
		c.sniff()
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *tapConn) sniff() {
	br := bufio.NewReader(c.Conn)
	first, err := br.Peek(1)
	if err == nil && first[0] != tlsHandshakeRecord && c.s.srv.TLS != nil {
		var head bytes.Buffer
		_ = c.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		for !bytes.Contains(head.Bytes(), []byte("\r\n\r\n")) && head.Len() < 64<<10 {
			line, err := br.ReadSlice('\n')
			head.Write(line)
			if err != nil && err != bufio.ErrBufferFull {
				break
			}
		}
		_ = c.Conn.SetReadDeadline(time.Time{})
		c.s.mu.Lock()
		c.s.plain = append(c.s.plain, head.String())
		c.s.mu.Unlock()
		c.pending = append(c.pending, head.Bytes()...)
	}
	// What br buffered beyond that, without reading more.
	rest, _ := br.Peek(br.Buffered())
	c.pending = append(c.pending, rest...)
}
