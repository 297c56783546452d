package login

import (
	"strings"
	"testing"

	"github.com/authvault/authvault/testkit/testpki"
)

// FuzzValidate feeds arbitrary fields to Validate: it must not panic, and its
// error must not repeat the password, token or key it was given.
func FuzzValidate(f *testing.F) {
	cert, key := testpki.KeyPair(f)
	f.Add("https://api.example:6443", "user", "password-123", "token-123", cert, key, cert, "http://proxy:3128")
	f.Add("api.example", "", "", "", []byte("garbage"), []byte("garbage"), []byte("LS0tLS1CRUdJTg=="), "ftp://x")
	f.Add("https://[::1]:6443/prefix", "", "p", "", []byte(nil), key, []byte(nil), "")
	f.Fuzz(func(t *testing.T, server, user, password, token string, certData, keyData, caData []byte, proxy string) {
		info := ConnectionInfo{
			Server: server, Username: user, Password: password, Token: token,
			CertificateData: certData, PrivateKeyData: keyData, CAData: caData, ProxyURL: proxy,
		}
		err := info.Validate()
		if err == nil {
			return
		}
		msg := err.Error()
		for _, s := range []string{password, token, string(keyData)} {
			// Short strings turn up in any message by chance; public fields may contain them too.
			if len(s) >= 12 && strings.Contains(msg, s) && !strings.Contains(server+user+proxy+string(certData)+string(caData), s) {
				t.Errorf("Validate() error %q reveals a secret %q", msg, s)
			}
		}
	})
}
