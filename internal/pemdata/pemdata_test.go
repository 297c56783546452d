package pemdata

import (
	"encoding/base64"
	"encoding/pem"
	"testing"

	"github.com/authvault/authvault/testkit/testpki"
)

func TestDecode(t *testing.T) {
	cert, _ := testpki.KeyPair(t)
	std := base64.StdEncoding.EncodeToString(cert)
	raw := base64.RawStdEncoding.EncodeToString(cert)
	wrapped := ""
	for i := 0; i < len(std); i += 64 {
		wrapped += std[i:min(i+64, len(std))] + "\n"
	}
	for name, in := range map[string]string{"pem": string(cert), "std": std, "raw": raw, "wrapped": wrapped, "padded": "  " + std + "\n"} {
		got, err := Decode([]byte(in))
		if err != nil {
			t.Errorf("%s: Decode() error %v", name, err)
			continue
		}
		if string(got) != string(cert) {
			t.Errorf("%s: Decode() = %q, want the certificate", name, got)
		}
	}
	if got, err := Decode(nil); err != nil || len(got) != 0 {
		t.Errorf("Decode(nil) = %q, %v; want empty, nil", got, err)
	}
	if _, err := Decode([]byte("%%%")); err == nil {
		t.Error("Decode(garbage) = nil error, want one")
	}
}

// FuzzDecode: Decode must not panic; what it accepts is PEM, and PEM
// comes back as it is.
func FuzzDecode(f *testing.F) {
	cert, _ := testpki.KeyPair(f)
	f.Add(cert)
	f.Add([]byte("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="))
	f.Add([]byte("not pem"))
	f.Add([]byte("-----BEGIN X-----\n-----END X-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Decode(data)
		if err != nil || len(data) == 0 {
			return
		}
		if block, _ := pem.Decode(out); block == nil {
			t.Errorf("Decode(%q) = %q, which holds no PEM block", data, out)
		}
		if block, _ := pem.Decode(data); block != nil && string(out) != string(data) {
			t.Errorf("Decode changed PEM input %q to %q", data, out)
		}
	})
}
