package login

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/redact"
)

// fingerprintKey keys the fingerprint hash. It is random per process so that
// a fingerprint in a log cannot confirm a guessed password or token offline;
// within one process, equal secrets still have equal fingerprints.
var fingerprintKey = func() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails on supported platforms.
	return key
}()

// The vault tells credentials apart by their digest.
func init() {
	handlerconf.Digest = func(info any) [sha256.Size]byte { return info.(*ConnectionInfo).digest() }
}

// digest identifies the credential's authentication material (see
// handlerconf.Digest): an HMAC-SHA-256 keyed per process.
func (ci ConnectionInfo) digest() [sha256.Size]byte {
	mac := hmac.New(sha256.New, fingerprintKey)
	for _, field := range [][]byte{
		[]byte(ci.Server), []byte(ci.Username), []byte(ci.Password),
		[]byte(ci.Scheme), []byte(ci.Token),
		[]byte(ci.CertificatePath), ci.CertificateData,
		[]byte(ci.PrivateKeyPath), ci.PrivateKeyData,
		[]byte(transportName(ci)),
	} {
		// Length prefixes keep ("ab","c") and ("a","bc") apart.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(field)))
		mac.Write(n[:])
		mac.Write(field)
	}
	var d [sha256.Size]byte
	mac.Sum(d[:0])
	return d
}

// Fingerprint names the credential in logs without revealing it: the first
// 8 hex digits of an HMAC-SHA-256 of its authentication material (server,
// basic auth, scheme and token, client certificate and key, own Transport),
// keyed per process: equal secrets have equal fingerprints within a process,
// and a fingerprint in a log cannot confirm a guessed secret offline.
func (ci ConnectionInfo) Fingerprint() string {
	d := ci.digest()
	return hex.EncodeToString(d[:4])
}

func transportName(ci ConnectionInfo) string {
	if ci.Transport == nil {
		return ""
	}
	return fmt.Sprintf("%T@%p", ci.Transport, ci.Transport)
}

// view is what printing a ConnectionInfo shows: public fields as they are,
// URLs without their user info, data as a size, secrets as redact.Marker, and the
// fingerprint.
type view struct {
	Server           string `json:"server"`
	CAPath           string `json:"caPath,omitempty"`
	CAData           string `json:"caData,omitempty"`
	Insecure         bool   `json:"insecure,omitempty"`
	TLSServerName    string `json:"tlsServerName,omitempty"`
	Username         string `json:"username,omitempty"`
	Password         string `json:"password,omitempty"`
	Scheme           string `json:"scheme,omitempty"`
	Token            string `json:"token,omitempty"`
	CertificatePath  string `json:"certificatePath,omitempty"`
	CertificateData  string `json:"certificateData,omitempty"`
	PrivateKeyPath   string `json:"privateKeyPath,omitempty"`
	PrivateKeyData   string `json:"privateKeyData,omitempty"`
	ProxyURL         string `json:"proxyURL,omitempty"`
	DefaultNamespace string `json:"defaultNamespace,omitempty"`
	Priority         int    `json:"priority,omitempty"`
	Expiration       string `json:"expiration,omitempty"`
	RefreshAfter     string `json:"refreshAfter,omitempty"`
	Transport        string `json:"transport,omitempty"`
	Fingerprint      string `json:"fingerprint"`
}

func (ci ConnectionInfo) view() view {
	v := view{
		Server:           redact.Value(ci.Server),
		CAPath:           ci.CAPath,
		CAData:           size(ci.CAData),
		Insecure:         ci.Insecure,
		TLSServerName:    ci.TLSServerName,
		Username:         ci.Username,
		Password:         secret(ci.Password != ""),
		Scheme:           ci.Scheme,
		Token:            secret(ci.Token != ""),
		CertificatePath:  ci.CertificatePath,
		CertificateData:  size(ci.CertificateData),
		PrivateKeyPath:   ci.PrivateKeyPath,
		PrivateKeyData:   secret(len(ci.PrivateKeyData) > 0),
		ProxyURL:         redact.Value(ci.ProxyURL),
		DefaultNamespace: ci.DefaultNamespace,
		Priority:         ci.Priority,
		Fingerprint:      ci.Fingerprint(),
	}
	if !ci.Expiration.IsZero() {
		v.Expiration = ci.Expiration.UTC().Format(time.RFC3339)
	}
	if ci.RefreshAfter > 0 {
		v.RefreshAfter = ci.RefreshAfter.String()
	}
	if ci.Transport != nil {
		v.Transport = fmt.Sprintf("%T", ci.Transport)
	}
	return v
}

func secret(set bool) string {
	if set {
		return redact.Marker
	}
	return ""
}

func size(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	return strconv.Itoa(len(data)) + " bytes"
}

// String shows the credential with its secrets redacted.
func (ci ConnectionInfo) String() string {
	v := ci.view()
	var b strings.Builder
	b.WriteString("login.ConnectionInfo{")
	fields := []struct{ name, value string }{
		{"Server", strconv.Quote(v.Server)},
		{"CAPath", quoteNonEmpty(v.CAPath)},
		{"CAData", v.CAData},
		{"Insecure", boolNonZero(v.Insecure)},
		{"TLSServerName", quoteNonEmpty(v.TLSServerName)},
		{"Username", quoteNonEmpty(v.Username)},
		{"Password", v.Password},
		{"Scheme", quoteNonEmpty(v.Scheme)},
		{"Token", v.Token},
		{"CertificatePath", quoteNonEmpty(v.CertificatePath)},
		{"CertificateData", v.CertificateData},
		{"PrivateKeyPath", quoteNonEmpty(v.PrivateKeyPath)},
		{"PrivateKeyData", v.PrivateKeyData},
		{"ProxyURL", quoteNonEmpty(v.ProxyURL)},
		{"DefaultNamespace", quoteNonEmpty(v.DefaultNamespace)},
		{"Priority", intNonZero(v.Priority)},
		{"Expiration", v.Expiration},
		{"RefreshAfter", v.RefreshAfter},
		{"Transport", v.Transport},
		{"Fingerprint", v.Fingerprint},
	}
	first := true
	for _, f := range fields {
		if f.value == "" {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString(f.name)
		b.WriteString(": ")
		b.WriteString(f.value)
	}
	b.WriteString("}")
	return b.String()
}

func quoteNonEmpty(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}

func boolNonZero(b bool) string {
	if !b {
		return ""
	}
	return "true"
}

func intNonZero(i int) string {
	if i == 0 {
		return ""
	}
	return strconv.Itoa(i)
}

// GoString makes %#v show the redacted form too.
func (ci ConnectionInfo) GoString() string { return ci.String() }

// Format makes every fmt verb (%v, %+v, %#v, %s, %q, %x, ...) print the
// redacted form, so no verb prints a raw field.
func (ci ConnectionInfo) Format(f fmt.State, verb rune) {
	redact.Print(f, verb, ci.String())
}

// MarshalJSON encodes the redacted form.
func (ci ConnectionInfo) MarshalJSON() ([]byte, error) { return json.Marshal(ci.view()) }

// MarshalLog implements logr.Marshaler: loggers print the redacted form.
func (ci ConnectionInfo) MarshalLog() any { return ci.view() }
