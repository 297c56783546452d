package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"

	"github.com/authvault/authvault/testkit/testpki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The serving certificate is read again when its files change (a rotated
// Secret); a broken pair keeps the previous one in service.
func TestServingCertificateReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(cert, key []byte) {
		t.Helper()
		if err := os.WriteFile(certFile, cert, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, key, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	c := &certReloader{certFile: certFile, keyFile: keyFile, log: funcr.New(func(p, a string) { logs.WriteString(p + a + "\n") }, funcr.Options{})}
	if _, err := c.load(); err == nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Fatalf("load without files = %v, want an error naming the file", err)
	}

	ca := testpki.NewCA(t)
	cert1, key1 := ca.Issue(t, "first", true)
	write(cert1, key1)
	first, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	cert2, key2 := ca.Issue(t, "second", true)
	time.Sleep(1100 * time.Millisecond) // checked at most once a second
	write(cert2, key2)
	second, err := c.load()
	if err != nil || second == first || second.Leaf.Subject.CommonName != "second" {
		t.Fatalf("after the files changed: %v, %v; want the second certificate", second, err)
	}

	time.Sleep(1100 * time.Millisecond)
	write([]byte("not a certificate"), key2)
	kept, err := c.load()
	if err != nil || kept != second {
		t.Errorf("with a broken pair: %v, %v; want the second certificate kept", kept, err)
	}
	if !strings.Contains(logs.String(), "keeping the previous one") || strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("log = %q, want the reload failure without the key", logs.String())
	}
}
