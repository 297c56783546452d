package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/testkit/testpki"
)

// through serves a GET through the sidecar's proxy, made from args, to
// target, and returns the status and body.
func through(t *testing.T, target string, args ...string) (int, string) {
	t.Helper()
	c, err := parse(append([]string{"--audience", "a", "--upstream", target}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := upstreamTransport(c, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer transport.CloseIdleConnections()
	front := httptest.NewServer(newProxy(c.upstream, "", transport, logr.Discard()))
	defer front.Close()
	resp, err := http.Get(front.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func proto(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "HTTP/%d", r.ProtoMajor) }

// An https upstream with a certificate of its own CA is reached with
// --upstream-ca-file, and only with it.
func TestUpstreamCAFile(t *testing.T) {
	ca := testpki.NewCA(t)
	up := httptest.NewUnstartedServer(http.HandlerFunc(proto))
	up.TLS = ca.ServerTLS(t, "upstream", nil)
	up.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	up.StartTLS()
	defer up.Close()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _ := through(t, up.URL); code != http.StatusBadGateway {
		t.Errorf("without --upstream-ca-file = %d, want 502: the system roots do not know the CA", code)
	}
	if code, body := through(t, up.URL, "--upstream-ca-file", caFile); code != 200 {
		t.Errorf("with --upstream-ca-file = %d %q, want 200", code, body)
	}
	other := filepath.Join(t.TempDir(), "other.crt")
	if err := os.WriteFile(other, testpki.NewCA(t).PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _ := through(t, up.URL, "--upstream-ca-file", other); code != http.StatusBadGateway {
		t.Errorf("with another CA = %d, want 502", code)
	}
	c, _ := parse("--audience", "a", "--upstream", up.URL, "--upstream-ca-file", filepath.Join(t.TempDir(), "missing"))
	if _, err := upstreamTransport(c, logr.Discard()); err == nil {
		t.Error("a missing --upstream-ca-file was accepted")
	}
	c, _ = parse("--audience", "a", "--upstream", up.URL, "--upstream-ca-file", "/dev/null")
	if _, err := upstreamTransport(c, logr.Discard()); err == nil {
		t.Error("an --upstream-ca-file without a certificate was accepted")
	}
}

// An upstream that speaks only h2c (gRPC without TLS) is reached with
// --upstream-force-h2c, and only with it.
func TestUpstreamForceH2C(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(proto))
	up.Config.Protocols = new(http.Protocols)
	up.Config.Protocols.SetUnencryptedHTTP2(true)
	up.Start()
	defer up.Close()
	if code, _ := through(t, up.URL); code != http.StatusBadGateway {
		t.Errorf("HTTP/1.1 to an h2c-only upstream = %d, want 502", code)
	}
	if code, body := through(t, up.URL, "--upstream-force-h2c"); code != 200 || body != "HTTP/2" {
		t.Errorf("with --upstream-force-h2c = %d %q, want 200 over HTTP/2", code, body)
	}
}
