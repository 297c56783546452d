package side

import (
	"net"
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
// ends, and no more once it is closed.
func TestCountConns(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	before := countConns()
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
	if got := countConns(); got != before+2 {
		t.Errorf("with a connection open: %d, want %d", got, before+2)
	}
	client.Close()
	if server != nil {
		server.Close()
	}
	if got := countConns(); got != before {
		t.Errorf("with it closed: %d, want %d", got, before)
	}
	if fds := countFDs(); fds <= 0 {
		t.Errorf("countFDs() = %d", fds)
	}
}
