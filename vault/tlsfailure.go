package vault

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// TLSError is why the transport invalidated a credential: TLS with its
// server failed verification. Its server's certificate is not signed by the
// credential's CA (the cluster's CA rotated), or the server refused the
// credential's client certificate. Verification is never relaxed: the
// handler runs again, after its backoff, and a handler that gives the new
// CA (rereads its CA file, or its kubeconfig) heals the vault.
type TLSError struct {
	Server string
	Err    error
}

func (e *TLSError) Error() string {
	return fmt.Sprintf("vault: TLS with %s failed verification: %v", e.Server, e.Err)
}

func (e *TLSError) Unwrap() error { return e.Err }

// Alerts a server sends when it refuses a client certificate (RFC 8446,
// section 6.2).
const (
	alertBadCertificate = 42
	alertUnknownCA      = 48
)

// isTLSFailure tells whether err is a failed verification of the server's
// certificate, or the server's refusal of the client's: what a CA rotation
// causes, and no network outage does.
func isTLSFailure(err error) bool {
	var (
		verification *tls.CertificateVerificationError
		unknownCA    x509.UnknownAuthorityError
		invalid      x509.CertificateInvalidError
		remote       *net.OpError
	)
	switch {
	case errors.As(err, &verification), errors.As(err, &unknownCA), errors.As(err, &invalid):
		return true
	case errors.As(err, &remote) && remote.Op == "remote error" && remote.Err != nil:
		// crypto/tls reports an alert from the peer as a net.OpError
		// around a value of its own, unexported type whose text is that
		// of the AlertError with the same number.
		text := remote.Err.Error()
		return text == tls.AlertError(alertBadCertificate).Error() || text == tls.AlertError(alertUnknownCA).Error()
	}
	return false
}
