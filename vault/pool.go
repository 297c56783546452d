package vault

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/transport"
	"k8s.io/utils/clock"
)

// Connection settings, as client-go sets them for its own transports.
const (
	dialTimeout         = 30 * time.Second
	dialKeepAlive       = 30 * time.Second
	tlsHandshakeTimeout = 10 * time.Second
	idleConnsPerHost    = 25
	// sweepInterval is how often the pool looks for transports to retire
	// and closes the idle connections of retired ones.
	sweepInterval = 2 * time.Second
	// defaultGrace is how long a transport no credential uses is kept for
	// the next credential of its identity: a re-login after a 401 finds
	// the connection still open.
	defaultGrace = time.Minute
)

// pooled is the transport of one identity (TLS and Authorization), shared
// by every credential with that identity.
type pooled struct {
	id identity
	rt http.RoundTripper
	// tls is rt's TLS config, nil for a round tripper built otherwise
	// (tests); an upgrade starts from a copy of it. proxy is the proxy
	// the identity names, nil for the environment's.
	tls   *tls.Config
	proxy *url.URL
	// closeIdle closes the connections no request uses; nil for a
	// round tripper without connections of its own.
	closeIdle func()
	refs      int          // credentials using it; guarded by pool.mu
	unused    time.Time    // when refs last fell to 0; guarded by pool.mu
	conns     atomic.Int64 // connections open now

	// Once the vault is closed or the transport retired (closing), every
	// connection is closed as soon as no response is in flight: closing
	// only the idle ones would leave those of a request or a watch running
	// then open until their idle timeout.
	inFlight atomic.Int64 // responses whose body is not yet read or closed
	closing  atomic.Bool
	connsMu  sync.Mutex
	open     map[*countedConn]struct{} // guarded by connsMu
}

// RoundTrip sends req through t's transport and counts its response as in
// flight until its body is read to the end or closed.
func (t *pooled) RoundTrip(req *http.Request) (*http.Response, error) {
	t.inFlight.Add(1)
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		t.finished()
		return resp, err
	}
	resp.Body = trackBody(resp.Body, t)
	return resp, nil
}

// finished notes the end of a response: the last one after Close closes
// every connection.
func (t *pooled) finished() {
	if t.inFlight.Add(-1) == 0 && t.closing.Load() {
		t.closeAll()
	}
}

// shut closes t's idle connections now and the others once their last
// response finishes.
func (t *pooled) shut() {
	t.closing.Store(true)
	if t.closeIdle != nil {
		t.closeIdle()
	}
	if t.inFlight.Load() == 0 {
		t.closeAll()
	}
}

// closeAll closes every connection t has open.
func (t *pooled) closeAll() {
	t.connsMu.Lock()
	conns := make([]*countedConn, 0, len(t.open))
	for c := range t.open {
		conns = append(conns, c)
	}
	t.connsMu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// dialed counts c among t's open connections.
func (t *pooled) dialed(c net.Conn) net.Conn {
	cc := &countedConn{Conn: c, owner: t}
	t.conns.Add(1)
	t.connsMu.Lock()
	if t.open == nil {
		t.open = map[*countedConn]struct{}{}
	}
	t.open[cc] = struct{}{}
	t.connsMu.Unlock()
	return cc
}

// pool keeps one transport per identity. A transport whose credentials
// are all gone is kept for a grace period, for the next credential of the
// same identity, unless its identity has a token (no later credential has
// the same); then it is retired: its idle connections are closed at once,
// the others as soon as no response is in flight on it (and every
// sweepInterval), so a connection still serving a request or a watch is
// closed only once that is done.
//
// The pool runs on the real clock even when the vault's is fake: it only
// closes connections.
type pool struct {
	clock clock.WithDelayedExecution
	spawn func(func()) bool
	// build makes the transport of an identity, starting from the TLS
	// config of another with the same TLS settings if it is given; tests
	// replace it.
	build func(identity, *tls.Config) (*pooled, error)
	grace time.Duration

	mu      sync.Mutex // guards the fields below and every pooled.refs
	live    map[identity]*pooled
	retired []*pooled
	sweep   clock.Timer // armed while retired is not empty
	closed  bool

	plainOnce   sync.Once // builds plainRT for requests the vault does not route
	plainRT     http.RoundTripper
	plainPooled *pooled                // plainRT's transport, once built
	plainBuilt  atomic.Pointer[pooled] // plainPooled, for closeIdleConnections, which cannot wait on plainOnce
}

func newPool(spawn func(func()) bool) *pool {
	return &pool{
		clock: clock.RealClock{}, spawn: spawn, build: buildTransport, grace: defaultGrace,
		live: map[identity]*pooled{},
	}
}

// acquire returns the transport of id, building it on first use.
func (p *pool) acquire(id identity) (*pooled, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.live[id]; ok {
		t.refs++
		return t, nil
	}
	t, err := p.build(id, p.sameTLSLocked(id))
	if err != nil {
		return nil, err
	}
	t.id, t.refs = id, 1
	p.live[id] = t
	return t, nil
}

// sessionCacheSize bounds the TLS sessions kept per TLS identity: one per
// server name it connects to.
const sessionCacheSize = 8

// sameTLSLocked returns the TLS config of a transport whose identity
// differs from id's in its Authorization only, nil when the pool has none.
// A new token's transport starts from a copy of it: the same parsed CA and
// client certificate, and the same TLS session cache, so that its first
// connection resumes the TLS session of the token before it (an
// abbreviated handshake) where the server issues session tickets, as
// kube-apiserver does. The client certificate is part of the TLS identity:
// a resumed session keeps the certificate of the handshake it resumes.
// p.mu is held.
func (p *pool) sameTLSLocked(id identity) *tls.Config {
	id.auth = ""
	sameTLS := func(t *pooled) bool {
		other := t.id
		other.auth = ""
		return other == id && t.tls != nil
	}
	for _, t := range p.live {
		if sameTLS(t) {
			return t.tls
		}
	}
	for _, t := range p.retired {
		if sameTLS(t) {
			return t.tls
		}
	}
	return nil
}

// release drops one credential's use of t.
func (p *pool) release(t *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t.refs--
	if t.refs > 0 {
		return
	}
	t.unused = p.clock.Now()
	if !p.closed {
		p.armSweep()
	}
}

// superseded retires the transports of old, a credential's route, at the
// next sweep rather than after the grace, when no credential uses them and
// next, the route of the credential that replaces it, has other ones.
func (p *pool) superseded(old, next *route) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range []*pooled{old.transport, old.bare} {
		if t != nil && t.refs == 0 && t != next.transport && t != next.bare {
			t.unused = time.Time{}
		}
	}
}

// armSweep schedules a sweep if none is; p.mu is held.
func (p *pool) armSweep() {
	if p.sweep == nil {
		p.sweep = p.clock.AfterFunc(sweepInterval, func() { p.spawn(p.sweepRetired) })
	}
}

// sweepRetired retires transports unused for the grace period, closes what
// became idle in retired transports, and forgets those with no connection
// left.
func (p *pool) sweepRetired() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweep = nil
	now := p.clock.Now()
	waiting := false // a transport still in its grace period
	for key, t := range p.live {
		switch {
		case t.refs > 0:
		case t.id.auth == "" && now.Sub(t.unused) < p.grace: // no later credential has a token's identity
			waiting = true
		default:
			delete(p.live, key)
			if t.closeIdle != nil {
				// From now on its connections close as soon as no
				// response is in flight on it, also after the pool forgets
				// it: a request that selected its credential before it went
				// can still open one (the token's connection closed by its
				// 401), which no sweep and no Close would see.
				t.closing.Store(true)
				p.retired = append(p.retired, t)
			}
		}
	}
	kept := p.retired[:0]
	for _, t := range p.retired {
		t.closeIdle()
		if t.conns.Load() > 0 {
			kept = append(kept, t)
		}
	}
	clear(p.retired[len(kept):])
	p.retired = kept
	if (waiting || len(p.retired) > 0) && !p.closed {
		p.armSweep()
	}
}

// openConns counts the connections of live transports (in use or in their
// grace period) and of retired ones.
func (p *pool) openConns() (live, retired int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.live {
		live += t.conns.Load()
	}
	for _, t := range p.retired {
		retired += t.conns.Load()
	}
	return live, retired
}

// closeIdleConnections closes the idle connections of every transport,
// live, retired and plain; those in use stay open.
func (p *pool) closeIdleConnections() {
	p.mu.Lock()
	ts := slices.Collect(maps.Values(p.live))
	ts = append(ts, p.retired...)
	p.mu.Unlock()
	if t := p.plainBuilt.Load(); t != nil {
		ts = append(ts, t)
	}
	for _, t := range ts {
		if t.closeIdle != nil {
			t.closeIdle()
		}
	}
}

// close stops sweeping and closes the connections of every transport: idle
// ones at once, the others as soon as the last response on them finishes.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	for _, t := range p.live {
		t.shut()
	}
	for _, t := range p.retired {
		t.shut()
	}
	p.plainOnce.Do(func() { p.plainRT = closedTransport{} })
	if p.plainPooled != nil {
		p.plainPooled.shut()
	}
}

// buildTransport makes an http.Transport for id with client-go's TLS setup
// and its connection defaults: HTTP/2, keep-alives, timeouts, and the proxy
// from the environment (NO_PROXY with CIDRs) unless the identity names one.
func buildTransport(id identity, sameTLS *tls.Config) (*pooled, error) {
	tlsConfig, err := tlsConfigFor(id, sameTLS)
	if err != nil {
		return nil, err
	}
	t := &pooled{}
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: dialKeepAlive}
	httpTransport := &http.Transport{
		TLSHandshakeTimeout: tlsHandshakeTimeout,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: idleConnsPerHost,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return t.dialed(c), nil
		},
	}
	if id.proxy != "" {
		proxy, err := url.Parse(id.proxy)
		if err != nil {
			// Not err itself: it repeats the URL, which may hold a password.
			return nil, errors.New("vault: ProxyURL is not a URL")
		}
		httpTransport.Proxy = http.ProxyURL(proxy)
		t.proxy = proxy
	}
	t.rt = utilnet.SetTransportDefaults(httpTransport)
	t.tls = httpTransport.TLSClientConfig // HTTP/2 set up: never nil
	t.closeIdle = httpTransport.CloseIdleConnections
	return t, nil
}

// tlsConfigFor is the TLS config of id's transport: a copy of sameTLS, the
// config of a transport with the same TLS settings, or else client-go's
// for id's settings with a session cache of its own.
func tlsConfigFor(id identity, sameTLS *tls.Config) (*tls.Config, error) {
	if sameTLS != nil {
		return sameTLS.Clone(), nil
	}
	c, err := transport.TLSConfigFor(&transport.Config{TLS: transport.TLSConfig{
		Insecure:   id.insecure,
		ServerName: id.serverName,
		CAData:     []byte(id.ca),
		CertData:   []byte(id.cert),
		KeyData:    []byte(id.key),
	}})
	if err != nil {
		// client-go's errors name what was wrong, not the key material.
		return nil, fmt.Errorf("vault: TLS configuration for %s: %w", id.host, err)
	}
	if c == nil { // no TLS setting: the defaults, as net/http's
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	c.ClientSessionCache = tls.NewLRUClientSessionCache(sessionCacheSize)
	return c, nil
}

// countedConn keeps its transport's count and set of open connections.
type countedConn struct {
	net.Conn
	owner  *pooled
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.owner.conns.Add(-1)
		c.owner.connsMu.Lock()
		delete(c.owner.open, c)
		c.owner.connsMu.Unlock()
	}
	return c.Conn.Close()
}

// plain returns the transport for requests the vault does not route: no
// CA, no client certificate, the proxy from the environment.
func (p *pool) plain() http.RoundTripper {
	p.plainOnce.Do(func() {
		t, err := p.build(identity{}, nil)
		if err != nil { // cannot happen without TLS material; be safe
			p.plainRT = http.DefaultTransport
			return
		}
		p.plainRT, p.plainPooled = t, t
		p.plainBuilt.Store(t)
	})
	return p.plainRT
}

// closedTransport answers every request with ErrClosed.
type closedTransport struct{}

func (closedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	closeBody(req)
	return nil, ErrClosed
}

// releaseRoute gives r's transports back: a credential no longer uses them.
func (p *pool) releaseRoute(r *route) {
	if r.transport == nil {
		return
	}
	p.release(r.transport)
	if r.bare != r.transport {
		p.release(r.bare)
	}
}
