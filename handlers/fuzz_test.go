package handlers

import (
	"strings"
	"testing"
)

// FuzzParseExecCredential feeds arbitrary plugin output to the parser: it
// must not panic, what it accepts has a token or a certificate and key, and
// its errors never repeat a token from the output.
func FuzzParseExecCredential(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"Secret_Token_123"}}`,
		`{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"2030-01-01T00:00:00Z"}}`,
		`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"c","clientKeyData":"k"}}`,
		`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"Secret_Token_123","expirationTimestamp":"Secret_Token_123"}}`,
		`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":42}}`,
		`{"apiVersion":"v1","kind":"Secret"}`,
		`Secret_Token_123`,
		`{"kind":"ExecCredential"`,
		``,
		`{"apiVersion":"Secret_Token_123","kind":"Secret_Token_123"}`,
		`{"apiVersion":"client.authentication.k8s.io/v1","kind":"Secret_Token_123"}`,
	} {
		f.Add(execV1, []byte(seed))
		f.Add(execV1beta1, []byte(seed))
	}
	f.Fuzz(func(t *testing.T, version string, out []byte) {
		r, err := parseExecCredential(version, out)
		if err != nil {
			if strings.Contains(err.Error(), "Secret_Token_123") {
				t.Errorf("error %q repeats the output's token", err)
			}
			return
		}
		if r.token == "" && (len(r.cert) == 0 || len(r.key) == 0) {
			t.Errorf("accepted %q with neither a token nor a certificate and key", out)
		}
	})
}
