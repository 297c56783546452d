package side

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// TestCounterSum counts on through series that go and that reset, as a
// fleet's cluster that leaves and comes back does.
func TestCounterSum(t *testing.T) {
	series := func(values map[string]float64) []*dto.Metric {
		var ms []*dto.Metric
		for cluster, v := range values {
			ms = append(ms, &dto.Metric{
				Label:   []*dto.LabelPair{{Name: proto.String("cluster"), Value: proto.String(cluster)}},
				Counter: &dto.Counter{Value: proto.Float64(v)},
			})
		}
		return ms
	}
	var c counterSum
	for _, step := range []struct {
		name   string
		values map[string]float64
		want   float64
	}{
		{"two series", map[string]float64{"a": 3, "b": 2}, 5},
		{"b left", map[string]float64{"a": 3}, 5},
		{"b back, from zero", map[string]float64{"a": 3, "b": 1}, 6},
		{"a reset", map[string]float64{"a": 1, "b": 1}, 7},
		{"both grew", map[string]float64{"a": 2, "b": 4}, 11},
	} {
		c.observe(series(step.values))
		if got := c.total(); got != step.want {
			t.Errorf("%s: total %v, want %v", step.name, got, step.want)
		}
	}
}

// TestCountConns counts a real connection of the process's, both its
// ends, and no more once it is closed. The process's other connections
// (another test's server, a keep-alive closing late) come and go while it
// runs, so the exact figures are of the test's own sockets, and the
// process's total is only bounded by them.
func TestCountConns(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	own := map[string]bool{socketInode(t, client): true, socketInode(t, server): true}
	established := func() int {
		return establishedIn("/proc/self/net/tcp", own) + establishedIn("/proc/self/net/tcp6", own)
	}
	if got := established(); got != 2 {
		t.Errorf("with a connection open: %d of its ends established, want 2", got)
	}
	if got := countConns(); got < 2 {
		t.Errorf("with a connection open: countConns() = %d, want at least its 2 ends", got)
	}
	client.Close()
	server.Close()
	if got := established(); got != 0 {
		t.Errorf("with it closed: %d of its ends established, want 0", got)
	}
	if fds := countFDs(); fds <= 0 {
		t.Errorf("countFDs() = %d", fds)
	}
}

// socketInode is the inode of c's socket, as /proc/self/fd names it.
func socketInode(t *testing.T, c net.Conn) string {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var target string
	var lerr error
	if err := raw.Control(func(fd uintptr) {
		target, lerr = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	}); err != nil || lerr != nil {
		t.Fatal(err, lerr)
	}
	inode, ok := strings.CutPrefix(target, "socket:[")
	if !ok {
		t.Fatalf("fd of a connection links to %q", target)
	}
	return strings.TrimSuffix(inode, "]")
}
