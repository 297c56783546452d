//lint:file-ignore SA1019 apimachinery's httpstream, deprecated from v0.36, is what client-go's dialers return in every supported release.

package vault

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	apiremotecommand "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	streamspdy "k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testpki"
)

// streamWait bounds every wait of a stream test: generous, the machine is
// shared.
const streamWait = 30 * time.Second

// noGoroutineLeft fails t unless every goroutine started during it has
// ended once its cleanups have run. It polls rather than checks once:
// spdystream's shutdown of a connection whose close failed (the peer closed
// first, as a server does once an exec is done) lingers for a second,
// longer than TestMain's goleak check waits when a stream test runs last.
// Call it first, so that its cleanup runs last.
func noGoroutineLeft(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		deadline := time.Now().Add(streamWait)
		for {
			err := goleak.Find(before)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutines left behind: %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// executorCase builds one of client-go's exec executors from a config.
type executorCase struct {
	name string
	// kind is the upgrade the executor's first attempt asks for.
	kind upgradeKind
	new  func(t *testing.T, cfg *rest.Config, target string) remotecommand.Executor
}

var executorCases = []executorCase{
	{"SPDY", spdyUpgrade, newSPDYExecutor},
	{"WebSocket", webSocketUpgrade, newWebSocketExecutor},
	{"fallback", webSocketUpgrade, newFallbackExecutor},
}

func newSPDYExecutor(t *testing.T, cfg *rest.Config, target string) remotecommand.Executor {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	e, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	if err != nil {
		t.Fatalf("NewSPDYExecutor() error: %v", err)
	}
	return e
}

func newWebSocketExecutor(t *testing.T, cfg *rest.Config, target string) remotecommand.Executor {
	t.Helper()
	e, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, target)
	if err != nil {
		t.Fatalf("NewWebSocketExecutor() error: %v", err)
	}
	return e
}

// newFallbackExecutor is kubectl's: WebSocket first, SPDY when the
// WebSocket upgrade fails (the failure is k8s.io/streaming's error from
// client-go v0.36, apimachinery's before, as kubectl of each release checks).
func newFallbackExecutor(t *testing.T, cfg *rest.Config, target string) remotecommand.Executor {
	t.Helper()
	e, err := remotecommand.NewFallbackExecutor(newWebSocketExecutor(t, cfg, target), newSPDYExecutor(t, cfg, target), func(err error) bool {
		return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err) ||
			httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		t.Fatalf("NewFallbackExecutor() error: %v", err)
	}
	return e
}

// execTarget is the exec URL below cfg's server.
func execTarget(cfg *rest.Config) string {
	return cfg.Host + execPath + "?command=hostname&stdout=true"
}

// runExec streams e's command and returns what it printed on stdout.
func runExec(t *testing.T, e remotecommand.Executor) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	defer cancel()
	var out testlog.Writer
	err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out})
	return out.String(), err
}

// mustExec streams e's command and fails the test unless it printed the
// server's output.
func mustExec(t *testing.T, e remotecommand.Executor) {
	t.Helper()
	got, err := runExec(t, e)
	if err != nil {
		t.Fatalf("StreamWithContext() error: %v", err)
	}
	if got != execOutput {
		t.Fatalf("stdout = %q, want %q", got, execOutput)
	}
}

// streamVault is a vault with one handler and no fallback, and its
// RESTConfig; closed when the test ends.
func streamVault(t *testing.T, h login.Handler, opts ...login.Option) (*Vault, *rest.Config) {
	t.Helper()
	v := New(Options{NoFallback: true})
	t.Cleanup(v.Close)
	v.OnLogin(h, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	defer cancel()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		t.Fatalf("RESTConfig() error: %v", err)
	}
	return v, cfg
}

// switchable is a login handler that returns what set last gave it, and
// notes why it was called.
type switchable struct {
	info    atomic.Pointer[login.ConnectionInfo]
	mu      sync.Mutex // guards reasons
	reasons []login.ReasonKind
}

func newSwitchable(info login.ConnectionInfo) *switchable {
	s := &switchable{}
	s.set(info)
	return s
}

func (s *switchable) set(info login.ConnectionInfo) { s.info.Store(&info) }

func (s *switchable) login(ctx context.Context) (*login.ConnectionInfo, error) {
	s.mu.Lock()
	reason, _ := login.ReasonFrom(ctx)
	s.reasons = append(s.reasons, reason.Kind)
	s.mu.Unlock()
	info := *s.info.Load()
	return &info, nil
}

func (s *switchable) calls() []login.ReasonKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]login.ReasonKind(nil), s.reasons...)
}

// minter is a login handler that mints a new token on each login, which
// its server accepts while accept is set.
type minter struct {
	srv    *streamServer
	caPEM  []byte
	accept atomic.Bool
	mu     sync.Mutex // guards minted
	minted []string
}

func newMinter(srv *streamServer, ca *testpki.CA) *minter {
	m := &minter{srv: srv, caPEM: ca.PEM}
	m.accept.Store(true)
	return m
}

func (m *minter) login(context.Context) (*login.ConnectionInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tok := fmt.Sprintf("minted-%d-%d", len(m.minted)+1, time.Now().UnixNano())
	m.minted = append(m.minted, tok)
	if m.accept.Load() {
		m.srv.allow(tok)
	}
	return &login.ConnectionInfo{Server: m.srv.URL(), CAData: m.caPEM, Token: tok}, nil
}

// tokens returns the tokens minted so far.
func (m *minter) tokens() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.minted...)
}

// waitFor polls cond until it holds, failing the test after streamWait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(streamWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rotate has the vault's handlers log in again and waits until the
// credential it hands out is no longer old.
func rotate(t *testing.T, v *Vault, old *Credential) *Credential {
	t.Helper()
	v.Refresh()
	var cur *Credential
	waitFor(t, "the rotated credential", func() bool {
		cur = mustSelect(t, v)
		return cur != old
	})
	return cur
}

// noSecretIn fails the test when err's text holds any of secrets.
func noSecretIn(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q reveals a secret", err)
		}
	}
}

func bearer(token string) string { return "Bearer " + token }

func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// upgradeRequest is the request client-go's SPDY executor sends for an
// upgrade to protocol at target; the round tripper adds the upgrade headers.
func upgradeRequest(t *testing.T, target, protocol string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(streamhttp.HeaderProtocolVersion, protocol)
	return req
}

const remotecommandV4 = apiremotecommand.StreamProtocolV4Name

// isUnknownAuthority tells whether err is x509's: the server's certificate
// is not signed by a CA the client trusts.
func isUnknownAuthority(err error) bool {
	var unknown x509.UnknownAuthorityError
	return errors.As(err, &unknown)
}

// ordinaryRequest sends a GET through a client built from cfg.
func ordinaryRequest(t *testing.T, cfg *rest.Config) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(cfg.Host + "/version")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ordinary request = %v, %v; want 200", resp, err)
	}
	_ = resp.Body.Close()
}

// TestStreamExecCarriesEachKindOfCredential runs a command through each of
// client-go's executors on a config from RESTConfig, with a token, basic
// auth and a client certificate: the upgrade trusts the credential's CA
// and carries its authentication, which the server checks.
func TestStreamExecCarriesEachKindOfCredential(t *testing.T) {
	noGoroutineLeft(t)
	type credential struct {
		name             string
		info             func(t *testing.T, srv *streamServer, clientCA *testpki.CA) login.ConnectionInfo
		wantAuth, wantCN string // Authorization and client certificate the server sees
	}
	credentials := []credential{
		{"token", func(_ *testing.T, srv *streamServer, _ *testpki.CA) login.ConnectionInfo {
			srv.allow("exec-token")
			return login.ConnectionInfo{Token: "exec-token"}
		}, bearer("exec-token"), ""},
		{"basic auth", func(_ *testing.T, srv *streamServer, _ *testpki.CA) login.ConnectionInfo {
			srv.allowBasic("exec-user", "exec-password")
			return login.ConnectionInfo{Username: "exec-user", Password: "exec-password"}
		}, basicAuth("exec-user", "exec-password"), ""},
		{"client certificate", func(t *testing.T, srv *streamServer, clientCA *testpki.CA) login.ConnectionInfo {
			srv.allowCert("exec-cert-user")
			cert, key := clientCA.Issue(t, "exec-cert-user", false)
			return login.ConnectionInfo{CertificateData: cert, PrivateKeyData: key}
		}, "", "exec-cert-user"},
	}
	type executor struct {
		executorCase
		noWebSocket bool          // the server takes SPDY only
		wantKinds   []upgradeKind // the upgrades the server sees
	}
	executors := []executor{
		{executorCases[0], false, []upgradeKind{spdyUpgrade}},
		{executorCases[1], false, []upgradeKind{webSocketUpgrade}},
		{executorCases[2], false, []upgradeKind{webSocketUpgrade}},
		{executorCase{"fallback to SPDY", webSocketUpgrade, newFallbackExecutor}, true, []upgradeKind{webSocketUpgrade, spdyUpgrade}},
	}
	for _, c := range credentials {
		for _, e := range executors {
			t.Run(c.name+"/"+e.name, func(t *testing.T) {
				ca, clientCA := testpki.NewCA(t), testpki.NewCA(t)
				srv := newStreamServer(t, ca, clientCA)
				srv.noWebSocket.Store(e.noWebSocket)
				info := c.info(t, srv, clientCA)
				info.Server, info.CAData = srv.URL(), ca.PEM
				h := newSwitchable(info)
				v, cfg := streamVault(t, h.login)
				cred := mustSelect(t, v)

				mustExec(t, e.new(t, cfg, execTarget(cfg)))

				hits := srv.seenHits(true)
				if len(hits) != len(e.wantKinds) {
					t.Fatalf("server saw upgrades %+v, want %v", hits, e.wantKinds)
				}
				for i, got := range hits {
					if got.Kind != e.wantKinds[i] || got.Auth != c.wantAuth || got.CertCN != c.wantCN {
						t.Errorf("upgrade %d: server saw %s with Authorization %q and certificate %q, want %s with %q and %q",
							i, got.Kind, got.Auth, got.CertCN, e.wantKinds[i], c.wantAuth, c.wantCN)
					}
				}
				last := hits[len(hits)-1]
				if last.Status != http.StatusSwitchingProtocols {
					t.Errorf("last upgrade answered %d, want 101", last.Status)
				}
				// A refused WebSocket (400) is no reason to drop the credential.
				if got := mustSelect(t, v); got != cred || len(h.calls()) != 1 {
					t.Errorf("after the exec: credential %v, %d logins; want the first one, 1 login", got, len(h.calls()))
				}
			})
		}
	}
}

// forwardDialer is the port-forward dialer kubectl builds over cfg: SPDY,
// through an http.Client that follows redirects.
func forwardDialer(t *testing.T, cfg *rest.Config, target string) httpstream.Dialer {
	t.Helper()
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatalf("spdy.RoundTripperFor() error: %v", err)
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	return spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
}

// dialForward upgrades to port-forward through d.
func dialForward(t *testing.T, d httpstream.Dialer) httpstream.Connection {
	t.Helper()
	conn, protocol, err := d.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		t.Fatalf("Dial() error: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if protocol != portforward.PortForwardProtocolV1Name {
		t.Fatalf("Dial() protocol = %q, want %q", protocol, portforward.PortForwardProtocolV1Name)
	}
	return conn
}

// streamConn is what echo needs of a port-forward connection, over streams
// of type S: apimachinery's httpstream.Connection, which client-go's
// dialers return in every release this module supports, and
// k8s.io/streaming's, which client-go's dialers return from v0.36 only,
// have these methods over Stream types of their own.
type streamConn[S io.ReadWriteCloser] interface {
	CreateStream(headers http.Header) (S, error)
	RemoveStreams(streams ...S)
	Close() error
}

// echo opens the stream pair of port-forward request id on conn, as
// client-go's PortForwarder does, sends msg and checks it comes back.
func echo[S io.ReadWriteCloser, C streamConn[S]](t *testing.T, conn C, id int, msg string) {
	t.Helper()
	watchdog := time.AfterFunc(streamWait, func() { _ = conn.Close() })
	defer watchdog.Stop()
	headers := http.Header{}
	headers.Set(v1.StreamType, v1.StreamTypeError)
	headers.Set(v1.PortHeader, "8080")
	headers.Set(v1.PortForwardRequestIDHeader, strconv.Itoa(id))
	errStream, err := conn.CreateStream(headers)
	if err != nil {
		t.Fatalf("CreateStream(error) error: %v", err)
	}
	_ = errStream.Close() // the client writes nothing on it
	headers.Set(v1.StreamType, v1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		t.Fatalf("CreateStream(data) error: %v", err)
	}
	defer conn.RemoveStreams(errStream, data)
	if _, err := io.WriteString(data, msg); err != nil {
		t.Fatalf("writing to the data stream: %v", err)
	}
	_ = data.Close() // half-close: the peer's echo ends
	got, err := io.ReadAll(data)
	if err != nil || string(got) != msg {
		t.Fatalf("data stream echoed %q, %v; want %q", got, err, msg)
	}
	if failure, err := io.ReadAll(errStream); err != nil || len(failure) > 0 {
		t.Fatalf("error stream = %q, %v; want it empty", failure, err)
	}
}

// forwarder runs client-go's PortForwarder for remote port 8080 over d on
// a local port until the test ends.
func forwarder(t *testing.T, d httpstream.Dialer) (localPort uint16) {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("portforward.New() error: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("ForwardPorts() error: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("ForwardPorts() error: %v", err)
	case <-time.After(streamWait):
		t.Fatal("timed out waiting for the port-forward")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("GetPorts() = %v, %v", ports, err)
	}
	return ports[0].Local
}

// echoLocal sends msg through the local port of a PortForwarder and checks
// it comes back.
func echoLocal(t *testing.T, port uint16, msg string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), streamWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(streamWait))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != msg {
		t.Fatalf("port-forward echoed %q, %v; want %q", got, err, msg)
	}
}

// TestStreamPortForwardAcrossTokenRotation forwards a port through
// client-go's PortForwarder, rotates the token and revokes the old one: the
// forward already open keeps carrying bytes both ways (a session is
// authenticated once, at its upgrade), and a forward opened after the
// rotation carries the new token.
func TestStreamPortForwardAcrossTokenRotation(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newStreamServer(t, ca, nil)
	m := newMinter(srv, ca)
	v, cfg := streamVault(t, m.login, login.Backoff(10*time.Millisecond, time.Second))
	first := mustSelect(t, v)
	target := cfg.Host + portForwardPath

	local := forwarder(t, forwardDialer(t, cfg, target))
	echoLocal(t, local, "before the rotation")

	rotate(t, v, first)
	srv.revoke(first.Info.Token)

	echoLocal(t, local, "on the forward opened before")
	conn := dialForward(t, forwardDialer(t, cfg, target))
	echo[httpstream.Stream](t, conn, 0, "on a forward opened after")
	echo[httpstream.Stream](t, conn, 1, "and another stream pair on it")

	tokens := m.tokens()
	if len(tokens) != 2 {
		t.Fatalf("handler minted %d tokens, want 2", len(tokens))
	}
	var got []string
	for _, h := range srv.seenHits(true) {
		if h.Status != http.StatusSwitchingProtocols {
			t.Errorf("server answered a port-forward upgrade %d, want 101", h.Status)
		}
		got = append(got, h.Auth)
	}
	if want := []string{bearer(tokens[0]), bearer(tokens[1])}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("server saw port-forward upgrades with %q, want %q", got, want)
	}
}

// TestStreamStreamingSPDYRoundTripper: a caller that builds the SPDY round
// tripper from k8s.io/streaming, where apimachinery's deprecation notice
// sends it, with the TLS config client-go makes from the vault's config,
// forwards a port with the vault's credential as through
// spdy.RoundTripperFor.
func TestStreamStreamingSPDYRoundTripper(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newStreamServer(t, ca, nil)
	srv.allow("streaming-token")
	_, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "streaming-token"}))

	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	upgradeRT, err := streamspdy.NewRoundTripperWithConfig(streamspdy.RoundTripperConfig{TLS: tlsConfig, Proxier: cfg.Proxy})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, upgradeRT)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host + portForwardPath)
	if err != nil {
		t.Fatal(err)
	}
	echo[streamhttp.Stream](t, streamingDial(t, upgradeRT, &http.Client{Transport: rt}, u), 0, "through k8s.io/streaming's round tripper")

	if got := srv.seenHits(true); len(got) != 1 || got[0].Auth != bearer("streaming-token") {
		t.Errorf("server saw %+v, want one upgrade with the token", got)
	}
}

// streamingDial upgrades to port-forward at u through client, whose round
// tripper ends in upgradeRT, and returns the connection: what client-go's
// dialer for k8s.io/streaming does, which client-go has only from v0.36.
func streamingDial(t *testing.T, upgradeRT streamhttp.UpgradeRoundTripper, client *http.Client, u *url.URL) streamhttp.Connection {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(streamhttp.HeaderConnection, streamhttp.HeaderUpgrade)
	req.Header.Set(streamhttp.HeaderUpgrade, streamspdy.HeaderSpdy31)
	req.Header.Set(streamhttp.HeaderProtocolVersion, portforward.PortForwardProtocolV1Name)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the upgrade: %v", err)
	}
	defer resp.Body.Close()
	conn, err := upgradeRT.NewConnection(resp)
	if err != nil {
		t.Fatalf("NewConnection() error: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestStreamRevokedTokenRetriedOnce sends an upgrade with a token the
// server has revoked: the 401 invalidates it, and the upgrade goes once
// more, with the next credential, and succeeds. The server answered one
// 401.
func TestStreamRevokedTokenRetriedOnce(t *testing.T) {
	noGoroutineLeft(t)
	for _, e := range executorCases {
		t.Run(e.name, func(t *testing.T) {
			ca := testpki.NewCA(t)
			srv := newStreamServer(t, ca, nil)
			m := newMinter(srv, ca)
			v, cfg := streamVault(t, m.login, login.Backoff(10*time.Millisecond, time.Second))
			revoked := mustSelect(t, v)
			srv.revoke(revoked.Info.Token)

			mustExec(t, e.new(t, cfg, execTarget(cfg)))

			if got := srv.upgrades401(); got != 1 {
				t.Errorf("server answered %d upgrades with 401, want 1", got)
			}
			tokens := m.tokens()
			hits := srv.seenHits(true)
			if len(tokens) != 2 || len(hits) != 2 || hits[0].Auth != bearer(tokens[0]) || hits[1].Auth != bearer(tokens[1]) ||
				hits[1].Status != http.StatusSwitchingProtocols || hits[1].Kind != e.kind {
				t.Errorf("server saw %+v for tokens %q, want the revoked token's 401 then the next token's 101 (%s)", hits, tokens, e.kind)
			}
			if got := mustSelect(t, v); got == revoked {
				t.Error("the revoked credential is still handed out")
			}
		})
	}
}

// TestStreamTwoBadCredentialsGiveUp revokes a token that has served, while
// the handler's next token is bad too: the caller gets the 401's error
// after two attempts, no more, and no error text holds a token.
func TestStreamTwoBadCredentialsGiveUp(t *testing.T) {
	noGoroutineLeft(t)
	for _, e := range executorCases[:2] { // the fallback would try both
		t.Run(e.name, func(t *testing.T) {
			ca := testpki.NewCA(t)
			srv := newStreamServer(t, ca, nil)
			m := newMinter(srv, ca)
			v, cfg := streamVault(t, m.login, login.Backoff(10*time.Millisecond, time.Second))
			// A token that served is no sign of a broken handler: the
			// vault holds nothing against the next login, and only the
			// bound on attempts ends the upgrade.
			ordinaryRequest(t, cfg)
			m.accept.Store(false)
			srv.revoke(mustSelect(t, v).Info.Token)

			_, err := runExec(t, e.new(t, cfg, execTarget(cfg)))
			if err == nil {
				t.Fatal("exec succeeded with tokens the server rejects")
			}
			if got := srv.upgrades401(); got != 2 {
				t.Errorf("server answered %d upgrades with 401, want 2", got)
			}
			if got := len(srv.seenHits(true)); got != 2 {
				t.Errorf("server saw %d upgrades, want 2", got)
			}
			if got := len(m.tokens()); got != 2 {
				t.Errorf("handler minted %d tokens, want 2: the first and the one retried with", got)
			}
			noSecretIn(t, err, m.tokens()...)
		})
	}
}

// markerWrapper is a user's own WrapTransport: it marks each request.
func markerWrapper(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		req = req.Clone(req.Context())
		req.Header.Set(markerHeader, "wrapped")
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestStreamUserWrapTransport: a wrapper added with cfg.Wrap composes with
// the vault's and streams; one that replaces cfg.WrapTransport outright
// leaves the upgrade without the vault, so it fails TLS verification as
// client-go fails it on any config without the CA, and sends no
// credential. Ordinary requests go through the vault either way.
func TestStreamUserWrapTransport(t *testing.T) {
	noGoroutineLeft(t)
	ca := testpki.NewCA(t)
	srv := newStreamServer(t, ca, nil)
	srv.allow("wrap-token")
	_, cfg := streamVault(t, handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "wrap-token"}))

	t.Run("Wrap", func(t *testing.T) {
		wrapped := rest.CopyConfig(cfg)
		wrapped.Wrap(markerWrapper)
		for _, e := range executorCases[:2] {
			before := len(srv.seenHits(true))
			mustExec(t, e.new(t, wrapped, execTarget(wrapped)))
			hits := srv.seenHits(true)[before:]
			if len(hits) != 1 || hits[0].Marker != "wrapped" || hits[0].Auth != bearer("wrap-token") {
				t.Errorf("%s: server saw %+v, want one upgrade with the marker and the token", e.name, hits)
			}
		}
	})

	t.Run("replaced", func(t *testing.T) {
		replaced := rest.CopyConfig(cfg)
		replaced.WrapTransport = markerWrapper
		before := len(srv.seenHits(false))
		hellos, _ := srv.tlsSeen()

		rt, _, err := spdy.RoundTripperFor(replaced)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt.RoundTrip(upgradeRequest(t, execTarget(replaced), remotecommandV4))
		if !isUnknownAuthority(err) {
			t.Errorf("SPDY upgrade error = %v, want x509's unknown authority", err)
		}
		_, err = runExec(t, newWebSocketExecutor(t, replaced, execTarget(replaced)))
		if !isUnknownAuthority(err) {
			t.Errorf("WebSocket exec error = %v, want x509's unknown authority", err)
		}
		noSecretIn(t, err, "wrap-token")
		if got := srv.seenHits(false)[before:]; len(got) != 0 {
			t.Errorf("server saw %+v, want no request: the handshakes fail", got)
		}
		if got, _ := srv.tlsSeen(); got < hellos+2 {
			t.Errorf("server saw %d handshakes, want the two upgrades' (%d)", got-hellos, 2)
		}

		client, err := rest.HTTPClientFor(replaced)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Get(replaced.Host + "/version")
		if err != nil {
			t.Fatalf("ordinary request error: %v", err)
		}
		_ = resp.Body.Close()
		if last := srv.seenHits(false); last[len(last)-1].Auth != bearer("wrap-token") || last[len(last)-1].Marker != "wrapped" {
			t.Errorf("ordinary request: server saw %+v, want the token and the marker", last[len(last)-1])
		}
		client.CloseIdleConnections()
	})
}

// TestStreamBothCredentialsStaleReloginServes holds two handlers' tokens
// that the server rejects at once (a revoked plugin token, a token file's
// token past its life): the upgrade meets both 401s and goes once more
// after the one login they call for, which serves, as an ordinary request
// would. Before, an upgrade gave up after its second attempt.
func TestStreamBothCredentialsStaleReloginServes(t *testing.T) {
	noGoroutineLeft(t)
	for _, e := range executorCases[:2] {
		t.Run(e.name, func(t *testing.T) {
			ca := testpki.NewCA(t)
			srv := newStreamServer(t, ca, nil)
			plugin, file := newMinter(srv, ca), newMinter(srv, ca)
			var stopped atomic.Bool // the plugin's issuer: issuing no more
			pluginLogin := func(ctx context.Context) (*login.ConnectionInfo, error) {
				if stopped.Load() {
					return nil, errors.New("not issuing")
				}
				return plugin.login(ctx)
			}
			v := New(Options{NoFallback: true})
			t.Cleanup(v.Close)
			v.OnLogin(pluginLogin, login.Backoff(10*time.Millisecond, time.Second))
			v.OnLogin(file.login, login.Backoff(10*time.Millisecond, time.Second))
			ctx, cancel := context.WithTimeout(context.Background(), streamWait)
			defer cancel()
			cfg, err := v.RESTConfig(ctx)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "both credentials to be published", func() bool {
				n := 0
				for _, g := range v.snap.Load().groups {
					n += len(g)
				}
				return n == 2
			})
			stopped.Store(true)
			for _, tok := range append(plugin.tokens(), file.tokens()...) {
				srv.revoke(tok)
			}
			mustExec(t, e.new(t, cfg, execTarget(cfg)))
			if got := srv.upgrades401(); got != 2 {
				t.Errorf("server answered %d upgrades with 401, want 2: one per stale credential", got)
			}
		})
	}
}
