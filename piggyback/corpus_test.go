package piggyback

import (
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testpki"
)

// corpus is testdata/kubeconfig made real in a temporary directory: the
// certificates and token files the kubeconfigs name, and their placeholders
// filled in.
type corpus struct {
	dir                 string
	ca, cert, key       []byte
	robotToken, idToken string
}

func newCorpus(t *testing.T) *corpus {
	t.Helper()
	ca := testpki.NewCA(t)
	cert, key := ca.Issue(t, "operator", false)
	c := &corpus{
		dir: t.TempDir(), ca: ca.PEM, cert: cert, key: key,
		robotToken: "robot-token-0123456789",
		idToken:    testpki.NewSigner(t).JWT(t, map[string]any{"iss": "https://issuer.example", "aud": "operator", "exp": time.Now().Add(time.Hour).Unix()}),
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	replacer := strings.NewReplacer("{{CA_DATA}}", b64(c.ca), "{{CERT_DATA}}", b64(c.cert), "{{KEY_DATA}}", b64(c.key), "{{ID_TOKEN}}", c.idToken)
	err := filepath.WalkDir("testdata/kubeconfig", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("testdata/kubeconfig", path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		c.write(t, rel, replacer.Replace(string(data)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.write(t, "certs/ca.crt", string(c.ca))
	c.write(t, "certs/client.crt", string(c.cert))
	c.write(t, "certs/client.key", string(c.key))
	c.write(t, "tokens/robot", c.robotToken)
	return c
}

func (c *corpus) write(t *testing.T, rel, content string) {
	t.Helper()
	path := c.path(rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (c *corpus) path(rel string) string { return filepath.Join(c.dir, rel) }

// isolate clears the environment the loaders read, so that the machine's
// own kubeconfig or cluster never leaks into a test.
func isolate(t *testing.T) (home string) {
	t.Helper()
	home = t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("POD_NAMESPACE", "")
	setFlag(t, "")
	old := serviceAccountRoot
	serviceAccountRoot = filepath.Join(home, "no-service-account")
	t.Cleanup(func() { serviceAccountRoot = old })
	return home
}

func setFlag(t *testing.T, value string) {
	t.Helper()
	f := flagValue()
	old := f.String()
	if err := f.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Set(old) })
}
