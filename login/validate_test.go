package login

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/authvault/authvault/testkit/testpki"
)

func TestValidateAccepts(t *testing.T) {
	cert, key := testpki.KeyPair(t)
	b64 := func(b []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(b)) }
	tests := []struct {
		name string
		info ConnectionInfo
	}{
		{"token", ConnectionInfo{Server: "https://api.example:6443", Token: "t"}},
		{"scheme alone", ConnectionInfo{Server: "https://api.example", Scheme: "Negotiate"}},
		{"path prefix", ConnectionInfo{Server: "https://rancher.example/k8s/clusters/c-1", Token: "t"}},
		{"http", ConnectionInfo{Server: "http://127.0.0.1:8080"}},
		{"ipv6", ConnectionInfo{Server: "https://[::1]:6443", Token: "t"}},
		{"basic", ConnectionInfo{Server: "https://a", Username: "u", Password: "p"}},
		{"pem cert and key", ConnectionInfo{Server: "https://a", CertificateData: cert, PrivateKeyData: key, CAData: cert}},
		{"base64 cert and key", ConnectionInfo{Server: "https://a", CertificateData: b64(cert), PrivateKeyData: b64(key), CAData: b64(cert)}},
		{"cert with token", ConnectionInfo{Server: "https://a", CertificateData: cert, PrivateKeyData: key, Token: "t"}},
		{"paths", ConnectionInfo{Server: "https://a", CAPath: "/ca", CertificatePath: "/c", PrivateKeyPath: "/k"}},
		{"own transport", ConnectionInfo{Server: "https://a", Transport: http.DefaultTransport}},
		{"proxy", ConnectionInfo{Server: "https://a", ProxyURL: "socks5://proxy:1080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.info.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	cert, key := testpki.KeyPair(t)
	otherCert, _ := testpki.KeyPair(t)
	tests := []struct {
		name string
		info ConnectionInfo
		want string // the error must contain this
	}{
		{"no server", ConnectionInfo{Token: "t"}, "Server is empty"},
		{"relative server", ConnectionInfo{Server: "api.example:6443"}, "Server"},
		{"ftp server", ConnectionInfo{Server: "ftp://api.example"}, "not an absolute https or http URL"},
		{"no host", ConnectionInfo{Server: "https:///path"}, "has no host"},
		{"unparsable server", ConnectionInfo{Server: "https://a b:%zz"}, "Server"},
		{"user info in server", ConnectionInfo{Server: "https://u:pw@a"}, "user info"},
		{"ca path and data", ConnectionInfo{Server: "https://a", CAPath: "/ca", CAData: cert}, "CAPath and CAData are both set"},
		{"cert path and data", ConnectionInfo{Server: "https://a", CertificatePath: "/c", CertificateData: cert, PrivateKeyData: key}, "CertificatePath and CertificateData"},
		{"key path and data", ConnectionInfo{Server: "https://a", CertificateData: cert, PrivateKeyPath: "/k", PrivateKeyData: key}, "PrivateKeyPath and PrivateKeyData"},
		{"cert without key", ConnectionInfo{Server: "https://a", CertificateData: cert}, "without its private key"},
		{"key without cert", ConnectionInfo{Server: "https://a", PrivateKeyPath: "/k"}, "without its client certificate"},
		{"basic and token", ConnectionInfo{Server: "https://a", Username: "u", Password: "p", Token: "t"}, "Username) and Token"},
		{"password alone", ConnectionInfo{Server: "https://a", Password: "p"}, "Password is set without Username"},
		{"transport and token", ConnectionInfo{Server: "https://a", Token: "t", Transport: http.DefaultTransport}, "Transport is set together"},
		{"garbage ca", ConnectionInfo{Server: "https://a", CAData: []byte("not a cert")}, "CAData is neither PEM nor base64 of PEM"},
		{"base64 of garbage", ConnectionInfo{Server: "https://a", CAData: []byte(base64.StdEncoding.EncodeToString([]byte("nope")))}, "CAData is neither"},
		{"key in ca", ConnectionInfo{Server: "https://a", CAData: key}, `CAData holds a PEM block of type "PRIVATE KEY"`},
		{"garbage key", ConnectionInfo{Server: "https://a", CertificateData: cert, PrivateKeyData: []byte("xx")}, "PrivateKeyData is neither"},
		{"mismatched pair", ConnectionInfo{Server: "https://a", CertificateData: otherCert, PrivateKeyData: key}, "do not form a key pair"},
		{"bad proxy scheme", ConnectionInfo{Server: "https://a", ProxyURL: "ftp://p"}, `ProxyURL "ftp://p": scheme is not http, https or socks5`},
		{"proxy without host", ConnectionInfo{Server: "https://a", ProxyURL: "http://"}, `ProxyURL "http://" has no host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.info.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %q, want it to contain %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "login: ") {
				t.Errorf("Validate() = %q, want the package prefix", err)
			}
		})
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	err := (&ConnectionInfo{CAPath: "/ca", CAData: []byte("x")}).Validate()
	for _, want := range []string{"Server is empty", "CAPath and CAData", "CAData is neither"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to contain %q", err, want)
		}
	}
}

func TestValidateNil(t *testing.T) {
	var ci *ConnectionInfo
	if err := ci.Validate(); err == nil {
		t.Error("Validate() of nil = nil, want an error")
	}
}

func TestValidateKeepsSecretsOutOfErrors(t *testing.T) {
	_, key := testpki.KeyPair(t)
	const secret = "s3cr3t-pw"
	infos := []ConnectionInfo{
		{Server: "https://a", Username: "u", Password: secret, Token: secret},
		{Server: "https://a", PrivateKeyData: key},
		{Server: "https://a", CertificateData: []byte(secret), PrivateKeyData: []byte(secret)},
		{Server: "https://a", ProxyURL: "ftp://user:" + secret + "@proxy"},
		{Server: "ftp://user:" + secret + "@a"},
		{Server: "https://user:" + secret + "@a b"},
		{Server: "https://a", ProxyURL: "http://user:" + secret + "@pro xy:%zz"},
	}
	for i, info := range infos {
		err := info.Validate()
		if err == nil {
			t.Fatalf("case %d: Validate() = nil, want an error", i)
		}
		for _, s := range []string{secret, string(key[30:60])} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("case %d: error %q reveals a secret", i, err)
			}
		}
	}
}

// A token, username, password or scheme with a control character fails
// every request inside net/http (or is sent mangled), and the credential is
// never invalidated: Validate rejects it, naming the field, not the value.
func TestValidateRejectsControlCharacters(t *testing.T) {
	const secret = "s3cr3t-value"
	controls := map[string]string{
		"CR": "\r", "LF": "\n", "CRLF": "\r\n", "NUL": "\x00", "TAB": "\t", "ESC": "\x1b",
		"BEL": "\a", "DEL": "\x7f", "C1 NEL": "\u0085", "C1 CSI": "\u009b",
	}
	fields := map[string]func(ci *ConnectionInfo, v string){
		"Token":    func(ci *ConnectionInfo, v string) { ci.Token = v },
		"Username": func(ci *ConnectionInfo, v string) { ci.Username, ci.Password = v, "p" },
		"Password": func(ci *ConnectionInfo, v string) { ci.Username, ci.Password = "u", v },
		"Scheme":   func(ci *ConnectionInfo, v string) { ci.Scheme, ci.Token = v, "t" },
	}
	for field, set := range fields {
		for name, c := range controls {
			for _, at := range []string{"end", "start", "middle"} {
				value := map[string]string{"end": secret + c, "start": c + secret, "middle": secret[:4] + c + secret[4:]}[at]
				t.Run(field+"/"+name+"/"+at, func(t *testing.T) {
					ci := ConnectionInfo{Server: "https://a"}
					set(&ci, value)
					err := ci.Validate()
					if err == nil {
						t.Fatalf("Validate() = nil, want an error for a %s in %s", name, field)
					}
					if !strings.Contains(err.Error(), "login: "+field+" ") || !strings.Contains(err.Error(), "control character") {
						t.Errorf("Validate() = %q, want it to name %s and the control character", err, field)
					}
					if strings.Contains(err.Error(), secret[:4]) || strings.Contains(err.Error(), secret[4:]) {
						t.Errorf("Validate() = %q, reveals the value", err)
					}
				})
			}
		}
	}
	for _, scheme := range []string{"Bearer x", " Bearer", "Bearer\u00a0"} {
		ci := ConnectionInfo{Server: "https://a", Scheme: scheme, Token: "t"}
		if err := ci.Validate(); err == nil || !strings.Contains(err.Error(), "login: Scheme ") {
			t.Errorf("Validate() with Scheme %q = %v, want an error naming Scheme", scheme, err)
		}
	}
	// Printable values, spaces inside a password and non-ASCII letters pass.
	for _, ci := range []ConnectionInfo{
		{Server: "https://a", Token: "eyJhbGciOiJSUzI1NiJ9.e30.c2ln-_~+/="},
		{Server: "https://a", Username: "jörg", Password: "pass word ü€"},
		{Server: "https://a", Scheme: "Negotiate"},
	} {
		if err := ci.Validate(); err != nil {
			t.Errorf("Validate(%v) = %v, want nil", ci, err)
		}
	}
}
