package login

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"github.com/authvault/authvault/internal/pemdata"
	"github.com/authvault/authvault/redact"
)

// Validate checks that the credential is complete and consistent, and returns
// an error that names the offending field when it is not. It reads no files:
// the Path fields are checked by whoever opens them. A Token, Username,
// Password or Scheme holding a control character (CR, LF, NUL, TAB, DEL or
// a C1 control) is rejected, as a Scheme holding white space is: requests
// would fail inside net/http, or carry a mangled credential, without the
// server ever rejecting it. Errors name fields, never a secret's value.
func (ci *ConnectionInfo) Validate() error {
	if ci == nil {
		return errors.New("login: ConnectionInfo is nil")
	}
	var errs []error
	if err := validateServer(ci.Server); err != nil {
		errs = append(errs, err)
	}
	pairs := []struct {
		path, data string
		hasPath    bool
		hasData    bool
	}{
		{"CAPath", "CAData", ci.CAPath != "", len(ci.CAData) > 0},
		{"CertificatePath", "CertificateData", ci.CertificatePath != "", len(ci.CertificateData) > 0},
		{"PrivateKeyPath", "PrivateKeyData", ci.PrivateKeyPath != "", len(ci.PrivateKeyData) > 0},
	}
	for _, p := range pairs {
		if p.hasPath && p.hasData {
			errs = append(errs, fmt.Errorf("login: %s and %s are both set; use one", p.path, p.data))
		}
	}
	hasCert := ci.CertificatePath != "" || len(ci.CertificateData) > 0
	hasKey := ci.PrivateKeyPath != "" || len(ci.PrivateKeyData) > 0
	switch {
	case hasCert && !hasKey:
		errs = append(errs, errors.New("login: a client certificate is set without its private key (PrivateKeyPath or PrivateKeyData)"))
	case hasKey && !hasCert:
		errs = append(errs, errors.New("login: a private key is set without its client certificate (CertificatePath or CertificateData)"))
	}
	for _, f := range []struct{ name, value string }{
		{"Token", ci.Token}, {"Username", ci.Username}, {"Password", ci.Password}, {"Scheme", ci.Scheme},
	} {
		if strings.ContainsFunc(f.value, unicode.IsControl) {
			errs = append(errs, fmt.Errorf("login: %s holds a control character (CR, LF, NUL, TAB or another); a value read from a file may end in a line break", f.name))
		}
	}
	if strings.ContainsFunc(ci.Scheme, unicode.IsSpace) {
		errs = append(errs, errors.New("login: Scheme holds white space; it is one word, such as Bearer"))
	}
	if ci.Password != "" && ci.Username == "" {
		errs = append(errs, errors.New("login: Password is set without Username"))
	}
	if ci.Username != "" && ci.Token != "" {
		errs = append(errs, errors.New("login: basic auth (Username) and Token are both set; use one"))
	}
	if ci.Transport != nil && (ci.Token != "" || ci.Scheme != "" || ci.Username != "" || hasCert) {
		errs = append(errs, errors.New("login: Transport is set together with a token, basic auth or client certificate; a credential with its own Transport authenticates by itself"))
	}
	if ci.ProxyURL != "" {
		if err := validateProxy(ci.ProxyURL); err != nil {
			errs = append(errs, err)
		}
	}
	_, caErr := decodeField("CAData", ci.CAData, "CERTIFICATE")
	cert, certErr := decodeField("CertificateData", ci.CertificateData, "CERTIFICATE")
	key, keyErr := decodeField("PrivateKeyData", ci.PrivateKeyData, "")
	errs = append(errs, caErr, certErr, keyErr)
	if certErr == nil && keyErr == nil && len(cert) > 0 && len(key) > 0 {
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			errs = append(errs, fmt.Errorf("login: CertificateData and PrivateKeyData do not form a key pair: %w", err))
		}
	}
	return errors.Join(errs...)
}

// The URL errors below quote the URL with its user info redacted (a proxy
// URL may carry a password, and a malformed Server may too), and wrap
// url.Parse's errors through redact.Error: url.Error quotes the whole URL.

func validateServer(server string) error {
	if server == "" {
		return errors.New("login: Server is empty")
	}
	shown := redact.Value(server)
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("login: Server %q is not a URL: %w", shown, redact.Error(err))
	}
	if u.User != nil || shown != server {
		return fmt.Errorf("login: Server %q carries user info; use Username and Password", shown)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("login: Server %q is not an absolute https or http URL", shown)
	}
	if u.Host == "" {
		return fmt.Errorf("login: Server %q has no host", shown)
	}
	return nil
}

func validateProxy(proxy string) error {
	shown := redact.Value(proxy)
	u, err := url.Parse(proxy)
	if err != nil {
		return fmt.Errorf("login: ProxyURL %q is not a URL: %w", shown, redact.Error(err))
	}
	switch u.Scheme {
	case "http", "https", "socks5":
	default:
		return fmt.Errorf("login: ProxyURL %q: scheme is not http, https or socks5", shown)
	}
	if u.Host == "" {
		return fmt.Errorf("login: ProxyURL %q has no host", shown)
	}
	return nil
}

// decodeField decodes one data field and, when blockType is set, checks
// that every PEM block in it has that type. Errors name the field only:
// the data may be a private key.
func decodeField(field string, data []byte, blockType string) ([]byte, error) {
	decoded, err := pemdata.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("login: %s is %w", field, err)
	}
	if blockType == "" {
		return decoded, nil
	}
	rest := decoded
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return decoded, nil
		}
		if block.Type != blockType {
			return nil, fmt.Errorf("login: %s holds a PEM block of type %q, want %q", field, block.Type, blockType)
		}
	}
}
