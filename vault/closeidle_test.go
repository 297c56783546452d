package vault

import (
	"bufio"
	"net/http"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// The vault's transport closes its idle connections when asked, as
// net/http's does, through http.Client.CloseIdleConnections and through
// apimachinery's CloseIdleConnectionsFor on a client-go transport built
// from its config; a watch in flight keeps its connection and streams on.
func TestCloseIdleConnectionsLeavesWhatIsInFlight(t *testing.T) {
	v, srv, _ := tokenVault(t, "tok")
	client := &http.Client{Transport: v.Transport()}
	open := func() int64 { live, retired := v.pool.openConns(); return live + retired }

	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
		t.Fatal("GET failed")
	}
	if open() != 1 {
		t.Fatalf("%d connections after a GET, want 1 (idle)", open())
	}
	client.CloseIdleConnections()
	eventually(t, "the idle connection to close", func() bool { return open() == 0 })

	resp, err := client.Get(srv.URL() + "/api/v1/watch")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch = %v %v", resp, err)
	}
	lines := bufio.NewScanner(resp.Body)
	read := func(k int) {
		t.Helper()
		for range k {
			if !lines.Scan() {
				t.Fatalf("the watch ended: %v", lines.Err())
			}
		}
	}
	read(2)
	cfg, err := v.RESTConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg) // client-go's wrappers around the vault's
	if err != nil {
		t.Fatal(err)
	}
	utilnet.CloseIdleConnectionsFor(rt)
	read(5) // the watch's connection was in use: it streams on
	if open() != 1 {
		t.Errorf("%d connections with a watch in flight, want its 1", open())
	}
	resp.Body.Close()
	eventually(t, "the watch's connection to be idle and closed", func() bool {
		utilnet.CloseIdleConnectionsFor(rt)
		return open() == 0
	})
}
