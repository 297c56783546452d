package login

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/authvault/authvault/redact"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/authvault/authvault/testkit/testpki"
)

// secretInfo holds a distinct secret in every secret field.
func secretInfo(t *testing.T) (ConnectionInfo, []string) {
	cert, key := testpki.KeyPair(t)
	info := ConnectionInfo{
		Server:           "https://api.example:6443",
		CAData:           cert,
		Username:         "alice",
		Password:         "pw-0123456789",
		Scheme:           "Bearer",
		Token:            "tok-abcdefghij",
		CertificateData:  cert,
		PrivateKeyData:   key,
		ProxyURL:         "http://proxyuser:proxypw-xyz@proxy.example:3128",
		DefaultNamespace: "team-a",
		Priority:         7,
		Expiration:       time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	// A slice of the key's base64 body: present in the key, nowhere else.
	keyBody := string(key[40:80])
	return info, []string{"pw-0123456789", "tok-abcdefghij", "proxypw-xyz", keyBody}
}

func TestPrintingRedactsSecrets(t *testing.T) {
	info, secrets := secretInfo(t)
	var logged bytes.Buffer
	log := funcr.New(func(prefix, args string) { logged.WriteString(prefix + args + "\n") }, funcr.Options{})
	log.Info("credential", "info", info, "ptr", &info)
	asJSON, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	ptrJSON, err := json.Marshal(struct{ I *ConnectionInfo }{&info})
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"String":   info.String(),
		"GoString": info.GoString(),
		"%v":       fmt.Sprintf("%v", info),
		"%+v":      fmt.Sprintf("%+v", info),
		"%#v":      fmt.Sprintf("%#v", info),
		"%s":       fmt.Sprintf("%s", info),
		"%q":       fmt.Sprintf("%q", info),
		"%x":       fmt.Sprintf("%x", info),
		"%d":       fmt.Sprintf("%d", info),
		"&%v":      fmt.Sprintf("%v", &info),
		"&%+v":     fmt.Sprintf("%+v", &info),
		"&%#v":     fmt.Sprintf("%#v", &info),
		"slice":    fmt.Sprintf("%+v", []ConnectionInfo{info}),
		"map":      fmt.Sprintf("%#v", map[string]*ConnectionInfo{"a": &info}),
		"nested":   fmt.Sprintf("%+v", struct{ Info ConnectionInfo }{info}),
		"json":     string(asJSON),
		"json ptr": string(ptrJSON),
		"logr":     logged.String(),
	}
	for name, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s output reveals secret %q: %s", name, s, out)
			}
		}
		for _, want := range []string{"api.example:6443", info.Fingerprint()} {
			if !strings.Contains(out, want) {
				t.Errorf("%s output = %s, want it to contain %q", name, out, want)
			}
		}
	}
	for _, want := range []string{"Token: " + redact.Marker, "Password: " + redact.Marker, "PrivateKeyData: " + redact.Marker, "http://" + redact.Marker + "@proxy.example:3128"} {
		if !strings.Contains(info.String(), want) {
			t.Errorf("String() = %s, want it to contain %q", info.String(), want)
		}
	}
}

func TestStringOmitsEmptyFields(t *testing.T) {
	info := ConnectionInfo{Server: "https://a"}
	got := info.String()
	want := `login.ConnectionInfo{Server: "https://a", Fingerprint: ` + info.Fingerprint() + `}`
	if got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
}

func TestStringShowsTransportType(t *testing.T) {
	info := ConnectionInfo{Server: "https://a", Transport: http.DefaultTransport}
	if got := info.String(); !strings.Contains(got, "Transport: *http.Transport") {
		t.Errorf("String() = %s, want the transport's type", got)
	}
}

func TestFingerprintFollowsAuthenticationMaterial(t *testing.T) {
	base := ConnectionInfo{Server: "https://a", Token: "t1"}
	same := base
	same.Expiration = time.Now().Add(time.Hour)
	same.DefaultNamespace = "ns"
	if base.Fingerprint() != same.Fingerprint() || base.digest() != same.digest() {
		t.Error("fingerprint changed with expiration or namespace; want it to follow authentication only")
	}
	if len(base.Fingerprint()) != 8 {
		t.Errorf("Fingerprint() = %q, want 8 hex digits", base.Fingerprint())
	}
	for name, other := range map[string]ConnectionInfo{
		"token":  {Server: "https://a", Token: "t2"},
		"server": {Server: "https://b", Token: "t1"},
		"shift":  {Server: "https://at", Token: "1"},
		"basic":  {Server: "https://a", Username: "t1"},
	} {
		if other.digest() == base.digest() {
			t.Errorf("%s: Digest() equal to a different credential's", name)
		}
	}
}

func TestPrintingShowsRefreshAfter(t *testing.T) {
	info := ConnectionInfo{Server: "https://a", Token: "t", RefreshAfter: 30 * time.Second}
	asJSON, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"String": info.String(), "json": string(asJSON)} {
		if want := map[string]string{"String": "RefreshAfter: 30s", "json": `"refreshAfter":"30s"`}[name]; !strings.Contains(out, want) {
			t.Errorf("%s = %s, want it to contain %s", name, out, want)
		}
	}
}
