package tcpproxy

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/authvault/authvault/testkit/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The proxy forwards both ways, and Close cuts a connection in use and
// refuses new ones.
func TestForwardsUntilClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }() // echo
		}
	}()
	p, err := Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo through the proxy: %q, %v", line, err)
	}
	p.Close()
	_ = c.SetReadDeadline(time.Now().Add(testwait.Hang))
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("a connection through a closed proxy still reads")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		c2.Close()
		t.Error("a closed proxy accepts connections")
	}
	p.Close() // again: no panic
}
