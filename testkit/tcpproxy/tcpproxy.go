// Package tcpproxy forwards TCP connections to an address until it is
// closed, which cuts every connection through it at once: a partition
// between a client and a server, made without touching either.
//
//	p, err := tcpproxy.Start("127.0.0.1:6443")
//	cfg.Host = "https://" + p.Addr() // the API server's certificate names 127.0.0.1
//	p.Close()                         // the client can no longer reach the server
package tcpproxy

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards each connection it accepts to its target.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex // guards conns and closed
	conns  []net.Conn
	closed bool
	copies sync.WaitGroup
}

// Start listens on a free port of 127.0.0.1 and forwards to target
// (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target}
	p.copies.Go(p.serve)
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.copies.Go(func() { _, _ = io.Copy(out, in); out.Close() })
		p.copies.Go(func() { _, _ = io.Copy(in, out); in.Close() })
	}
}

// track keeps a connection's two ends to cut at Close, or cuts them now
// if the proxy is closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	p.conns = append(p.conns, conns...)
	return true
}

// Close stops accepting and cuts every connection through the proxy; it
// returns once its goroutines have ended. It is safe to call more than
// once.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.ln.Close()
		for _, c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.copies.Wait()
}
