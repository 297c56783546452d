package piggyback

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authvault/authvault/login"
)

// A kubeconfig whose CA, client certificate or key file is a regular file
// that holds no PEM (a wrong file, a truncated write) fails at the handler,
// permanently, naming the entry, as a directory does.
func TestKubeconfigFileWithoutPEMFailsAtTheHandler(t *testing.T) {
	c := newCorpus(t)
	dir := t.TempDir()
	cert, key, ca := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.crt")
	writeFile(t, cert, string(c.cert))
	writeFile(t, key, string(c.key))
	writeFile(t, ca, string(c.ca))
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
