package flux_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// door is a TCP front door to the member: it listens before the member
// starts, so that its address can be the member's audience, and forwards
// each connection it accepts once open names the member. It counts the
// connections: each is a TLS handshake at the member.
type door struct {
	ln       net.Listener
	target   chan string // receives the member's host:port once
	accepted atomic.Int64

	mu     sync.Mutex // guards conns and closed
	conns  []net.Conn
	closed bool
	copies sync.WaitGroup
}

// openDoor listens on a free port of 127.0.0.1 (the member's serving
// certificate names 127.0.0.1).
func openDoor() (*door, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &door{ln: ln, target: make(chan string, 1)}
	d.copies.Go(d.serve)
	return d, nil
}

// Addr is the door's host:port.
func (d *door) Addr() string { return d.ln.Addr().String() }

// open starts forwarding to target (host:port).
func (d *door) open(target string) { d.target <- target }

func (d *door) serve() {
	var target string
	for {
		in, err := d.ln.Accept()
		if err != nil {
			return
		}
		if target == "" {
			select {
			case target = <-d.target:
			default:
				in.Close() // the member is not up yet
				continue
			}
		}
		d.accepted.Add(1)
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		if !d.track(in, out) {
			return
		}
		d.copies.Go(func() { _, _ = io.Copy(out, in); out.Close() })
		d.copies.Go(func() { _, _ = io.Copy(in, out); in.Close() })
	}
}

// track keeps a connection's ends to close at Close, or closes them now if
// the door is closed.
func (d *door) track(conns ...net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	d.conns = append(d.conns, conns...)
	return true
}

// Close stops listening and cuts every connection; it returns once the
// door's goroutines have ended. A nil door is closed.
func (d *door) Close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		d.ln.Close()
		for _, c := range d.conns {
			c.Close()
		}
	}
	d.mu.Unlock()
	d.copies.Wait()
}
