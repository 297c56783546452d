package piggyback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/authvault/authvault/login"
)

// A kubeconfig whose CA, client certificate, key or token file names a
// directory, or a missing or unreadable file, fails at the handler,
// permanently, naming the entry and the field — not later in the vault.
func TestKubeconfigFilesMustBeReadableFiles(t *testing.T) {
	dir, cert, key, ca := credentialFiles(t)
	subdir := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(subdir, 0o700); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "unreadable")
	writeFile(t, unreadable, "x")
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{"directory": subdir, "missing": filepath.Join(dir, "missing"), "relative directory": "a-directory"}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err == nil {
		bad["fifo"] = fifo // opening it would block: must be refused unopened
	}
	if f, err := os.Open(unreadable); err == nil {
		f.Close() // root reads anything
	} else {
		bad["unreadable"] = unreadable
	}
	for _, tc := range []struct{ entry, field string }{
		{`cluster "cluster-b"`, "certificate-authority"},
		{`user "user-b"`, "client-certificate"},
		{`user "user-b"`, "client-key"},
		{`user "user-b"`, "tokenFile"},
	} {
		for what, path := range bad {
			t.Run(tc.field+"/"+what, func(t *testing.T) {
				files := map[string]string{"certificate-authority": ca, "client-certificate": cert, "client-key": key}
				files[tc.field] = path
				user := fmt.Sprintf("{client-certificate: %q, client-key: %q}", files["client-certificate"], files["client-key"])
				if tc.field == "tokenFile" {
					user = fmt.Sprintf("{tokenFile: %q}", path)
				}
				kc := filepath.Join(dir, strings.ReplaceAll(tc.field+"-"+what, " ", "-")+".yaml")
				writeFile(t, kc, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: ctx-b
clusters: [{name: cluster-b, cluster: {server: "https://api.example", certificate-authority: %q}}]
contexts: [{name: ctx-b, context: {cluster: cluster-b, user: user-b}}]
users: [{name: user-b, user: %s}]
`, files["certificate-authority"], user))
				info, err := KubeconfigFrom(KubeconfigOptions{Path: kc})(context.Background())
				if err == nil {
					t.Fatalf("KubeconfigFrom() = %v, want an error for a %s %s", info, what, tc.field)
				}
				for _, want := range []string{"piggyback: handlers: kubeconfig " + kc, tc.entry, tc.field + ":"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error = %v, want it to contain %q", err, want)
					}
				}
				var pe *login.PermanentError
				if !errors.As(err, &pe) {
					t.Errorf("error %v is not permanent", err)
				}
			})
		}
	}
}

// A kubeconfig whose CA, client certificate or key file is a regular file
// that holds no PEM (a wrong file, a truncated write) fails at the handler,
// permanently, naming the entry, as a directory does.
func TestKubeconfigFileWithoutPEMFailsAtTheHandler(t *testing.T) {
	dir, cert, key, ca := credentialFiles(t)
	garbage := filepath.Join(dir, "garbage")
	writeFile(t, garbage, "this is not a certificate\n")
	for _, tc := range []struct{ entry, field string }{
		{`cluster "cluster-b"`, "certificate-authority"},
		{`user "user-b"`, "client-certificate"},
		{`user "user-b"`, "client-key"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			files := map[string]string{"certificate-authority": ca, "client-certificate": cert, "client-key": key}
			files[tc.field] = garbage
			kc := filepath.Join(dir, tc.field+".yaml")
			writeFile(t, kc, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: ctx-b
clusters: [{name: cluster-b, cluster: {server: "https://api.example", certificate-authority: %q}}]
contexts: [{name: ctx-b, context: {cluster: cluster-b, user: user-b}}]
users: [{name: user-b, user: {client-certificate: %q, client-key: %q}}]
`, files["certificate-authority"], files["client-certificate"], files["client-key"]))
			info, err := KubeconfigFrom(KubeconfigOptions{Path: kc})(context.Background())
			if err == nil {
				t.Fatalf("KubeconfigFrom() = %v, nil: a %s that holds no PEM passes the handler and fails later in the vault, retryably, naming no entry", info, tc.field)
			}
			var pe *login.PermanentError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.entry) {
				t.Errorf("error = %v, want a permanent error naming %s", err, tc.entry)
			}
		})
	}
}

// credentialFiles writes the corpus's client certificate, key and CA to a
// new directory and returns it and their paths.
func credentialFiles(t *testing.T) (dir, cert, key, ca string) {
	t.Helper()
	c := newCorpus(t)
	dir = t.TempDir()
	cert, key, ca = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.crt")
	writeFile(t, cert, string(c.cert))
	writeFile(t, key, string(c.key))
	writeFile(t, ca, string(c.ca))
	return dir, cert, key, ca
}
