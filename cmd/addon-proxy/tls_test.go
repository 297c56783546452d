package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/testkit/testpki"
)

// servingFiles writes a serving certificate and key from ca into a
// directory of the test's, and returns the flags that name them.
func servingFiles(t *testing.T, ca *testpki.CA) []string {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Issue(t, "addon-proxy", true)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for f, b := range map[string][]byte{certFile: cert, keyFile: key} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"--tls-cert-file", certFile, "--tls-key-file", keyFile}
}

// tlsSidecar serves 200 over TLS as the sidecar does with the flags args,
// and returns its address.
func tlsSidecar(t *testing.T, args ...string) string {
	t.Helper()
	c, err := parse(append([]string{"--audience", "a"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer("", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	if srv.TLSConfig, err = servingTLS(c, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serving TLS with %q: %v", args, err)
		}
	})
	return ln.Addr().String()
}

// handshake connects to addr over TLS with cfg (trusting ca) and returns
// the connection's state.
func handshake(t *testing.T, addr string, ca *testpki.CA, cfg *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	cfg.RootCAs = ca.Pool
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer conn.Close()
	return conn.ConnectionState(), nil
}

// --tls-min-version VersionTLS13 refuses a client that speaks TLS 1.2 at
// most; by default TLS 1.2 is served, and nothing older.
func TestTLSMinVersion(t *testing.T) {
	ca := testpki.NewCA(t)
	files := servingFiles(t, ca)
	only13 := tlsSidecar(t, append(files, "--tls-min-version", "VersionTLS13")...)
	if _, err := handshake(t, only13, ca, &tls.Config{MaxVersion: tls.VersionTLS12}); err == nil {
		t.Error("a TLS 1.2 client was served with --tls-min-version VersionTLS13")
	}
	if st, err := handshake(t, only13, ca, &tls.Config{}); err != nil || st.Version != tls.VersionTLS13 {
		t.Errorf("a TLS 1.3 client: version %x, %v; want TLS 1.3", st.Version, err)
	}

	byDefault := tlsSidecar(t, files...)
	if st, err := handshake(t, byDefault, ca, &tls.Config{MaxVersion: tls.VersionTLS12}); err != nil || st.Version != tls.VersionTLS12 {
		t.Errorf("a TLS 1.2 client by default: version %x, %v; want TLS 1.2", st.Version, err)
	}
	if _, err := handshake(t, byDefault, ca, &tls.Config{MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("a TLS 1.1 client was served by default")
	}
}

// --tls-cipher-suites names the TLS 1.2 suites served, by their IANA
// names: a client that offers none of them is refused, one that offers
// one of them gets it.
func TestTLSCipherSuites(t *testing.T) {
	ca := testpki.NewCA(t)
	const (
		served = tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 // one HTTP/2 requires
		other  = tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
	)
	addr := tlsSidecar(t, append(servingFiles(t, ca), "--tls-cipher-suites", tls.CipherSuiteName(served))...)
	if _, err := handshake(t, addr, ca, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{other}}); err == nil {
		t.Errorf("a client offering only %s was served", tls.CipherSuiteName(other))
	}
	st, err := handshake(t, addr, ca, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{other, served}})
	if err != nil || st.CipherSuite != served {
		t.Errorf("a client offering both: %s, %v; want %s", tls.CipherSuiteName(st.CipherSuite), err, tls.CipherSuiteName(served))
	}
}

// Bad TLS flags are refused with an error that names the flag and the
// value, and what would do.
func TestTLSFlagErrors(t *testing.T) {
	files := []string{"--tls-cert-file", "tls.crt", "--tls-key-file", "tls.key"}
	for name, tc := range map[string]struct {
		args []string
		want []string // in the error
	}{
		"unknown version":       {append(files, "--tls-min-version", "VersionTLS99"), []string{"--tls-min-version", "VersionTLS99", "VersionTLS13"}},
		"old version":           {append(files, "--tls-min-version", "VersionTLS10"), []string{"--tls-min-version", "VersionTLS10", "VersionTLS12"}},
		"unknown cipher":        {append(files, "--tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_NO_SUCH_SUITE"), []string{"--tls-cipher-suites", "TLS_NO_SUCH_SUITE"}},
		"none HTTP/2 can use":   {append(files, "--tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"), []string{"--tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "HTTP/2"}},
		"version without TLS":   {[]string{"--tls-min-version", "VersionTLS13"}, []string{"--tls-min-version", "--tls-cert-file"}},
		"ciphers without TLS":   {[]string{"--tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, []string{"--tls-cipher-suites", "--tls-cert-file"}},
		"a TLS 1.3 suite":       {append(files, "--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256"), []string{"--tls-cipher-suites", "TLS_AES_128_GCM_SHA256", "TLS 1.3"}},
		"client cert, no key":   {[]string{"--upstream", "https://127.0.0.1:8443", "--upstream-client-cert-file", "c.crt"}, []string{"--upstream-client-key-file"}},
		"client cert over http": {[]string{"--upstream-client-cert-file", "c.crt", "--upstream-client-key-file", "c.key"}, []string{"--upstream-client-cert-file", "https://"}},
	} {
		_, err := parse(append([]string{"--audience", "a"}, tc.args...)...)
		if err == nil {
			t.Errorf("%s: %q accepted", name, tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q, want it to name %q", name, err, w)
			}
		}
	}
	if _, err := parse("--audience", "a", "--tls-cipher-suites", "TLS_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", files[0], files[1], files[2], files[3]); err != nil {
		t.Errorf("two IANA names with a space between: %v", err)
	}
	// k8s.io's older spellings of the TLS 1.2 ChaCha20 suites, which
	// hardening guides list: TLS 1.2 suites, not refused as TLS 1.3's.
	if _, err := parse("--audience", "a", "--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", files[0], files[1], files[2], files[3]); err != nil {
		t.Errorf("the older ChaCha20 names: %v", err)
	}
}

// clientFiles writes a client certificate for cn from ca into dir.
func clientFiles(t *testing.T, ca *testpki.CA, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	cert, key := ca.Issue(t, cn, false)
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	for f, b := range map[string][]byte{certFile: cert, keyFile: key} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// An upstream that requires client certificates sees the one of
// --upstream-client-cert-file, and the new one once the files rotate.
func TestUpstreamClientCertificate(t *testing.T) {
	ca := testpki.NewCA(t)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	up.TLS = ca.ServerTLS(t, "upstream", ca)
	up.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	up.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	up.StartTLS()
	defer up.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _ := through(t, up.URL, "--upstream-ca-file", caFile); code != http.StatusBadGateway {
		t.Errorf("without a client certificate = %d, want 502: the upstream requires one", code)
	}

	certFile, keyFile := clientFiles(t, ca, dir, "first")
	c, err := parse("--audience", "a", "--upstream", up.URL, "--upstream-ca-file", caFile,
		"--upstream-client-cert-file", certFile, "--upstream-client-key-file", keyFile)
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
	get := func() (int, string) {
		t.Helper()
		resp, err := http.Get(front.URL + "/hello")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != 200 || body != "first" {
		t.Errorf("with --upstream-client-cert-file = %d %q, want 200 from the client certificate \"first\"", code, body)
	}

	time.Sleep(1100 * time.Millisecond) // the files are checked at most once a second
	clientFiles(t, ca, dir, "second")
	transport.CloseIdleConnections() // the next request makes a new connection
	if code, body := get(); code != 200 || body != "second" {
		t.Errorf("after the files rotated = %d %q, want 200 from the client certificate \"second\"", code, body)
	}

	c.upstreamKeyFile = filepath.Join(dir, "missing.key")
	if _, err := upstreamTransport(c, logr.Discard()); err == nil || !strings.Contains(err.Error(), "missing.key") {
		t.Errorf("a missing client key = %v, want an error naming the file", err)
	}
	// Another pair's key: the error says so, and holds nothing of the key.
	_, otherKey := ca.Issue(t, "other", false)
	c.upstreamKeyFile = filepath.Join(dir, "other.key")
	if err := os.WriteFile(c.upstreamKeyFile, otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = upstreamTransport(c, logr.Discard())
	body := strings.Split(string(otherKey), "\n")[1] // the first line of the key's base64
	if err == nil || !strings.Contains(err.Error(), "upstream client certificate") || strings.Contains(err.Error(), body[:16]) || strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("a key of another pair = %v, want an error naming the upstream client certificate, without the key", err)
	}
}

// The suites crypto/tls counts as insecure are named at start, and only
// those.
func TestInsecureCiphersAreNamed(t *testing.T) {
	insecure := tls.InsecureCipherSuites()[0]
	got := insecureCiphers([]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, insecure.ID})
	if len(got) != 1 || got[0] != insecure.Name {
		t.Errorf("insecureCiphers = %q, want [%s]", got, insecure.Name)
	}
	if got := insecureCiphers([]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}); len(got) != 0 {
		t.Errorf("insecureCiphers of a secure suite = %q, want none", got)
	}
}

// --version prints the version of the module the binary was built from,
// as the build recorded it (go version -m), and nothing is required
// beside it.
func TestVersion(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "addon-proxy")
	// -buildvcs=auto: a build in a checkout records the commit's version,
	// whatever GOFLAGS says.
	if out, err := exec.Command(goTool, "build", "-buildvcs=auto", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("addon-proxy --version: %v\n%s", err, out)
	}
	meta, err := exec.Command(goTool, "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var version, goVersion string
	sc := bufio.NewScanner(strings.NewReader(string(meta)))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 3 && fields[0] == "mod" && fields[1] == "github.com/authvault/authvault":
			version = fields[2]
		case len(fields) == 2 && strings.HasSuffix(fields[0], ":"):
			goVersion = fields[1]
		}
	}
	if version == "" || goVersion == "" {
		t.Fatalf("go version -m names no main module version or Go version:\n%s", meta)
	}
	got, want := strings.TrimSpace(string(out)), fmt.Sprintf("addon-proxy %s", version)
	if !strings.HasPrefix(got, want+" ") || !strings.Contains(got, goVersion) {
		t.Errorf("--version = %q, want %q followed by the Go version %s", got, want, goVersion)
	}
	t.Logf("--version: %s", got)
}

// --help lists under --tls-cipher-suites only suites that TLS 1.2 uses:
// TLS 1.3's are not chosen by any setting, and once they were listed as
// preferred among the TLS 1.2 ones.
func TestCipherSuitesHelpListsTLS12Only(t *testing.T) {
	fs := flag.NewFlagSet("addon-proxy", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	if _, err := parseFlags(fs, []string{"--help"}); err == nil {
		t.Fatal("--help parsed as a run")
	}
	help := out.String()
	for _, tls13 := range []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"} {
		if strings.Contains(help, tls13+",") || strings.Contains(help, tls13+".") || strings.HasSuffix(strings.TrimSpace(help), tls13) {
			t.Errorf("--help lists the TLS 1.3 suite %s", tls13)
		}
	}
	for _, tls12 := range []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA"} {
		if !strings.Contains(help, tls12) {
			t.Errorf("--help does not list the TLS 1.2 suite %s", tls12)
		}
	}
}
