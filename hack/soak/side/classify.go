package side

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// The kinds of wire.Failure.
const (
	kindUnauthorized = "unauthorized"
	kindForbidden    = "forbidden"
	kindRefused      = "refused"
	kindTLS          = "tls"
	kindTimeout      = "timeout"
	kindNoCluster    = "no-cluster"
	kindServer       = "server"
	kindLeaderLost   = "leader-lost"
	kindOther        = "other"
)

// errNoCluster is a fleet read of a cluster that the side had and has no
// more.
var errNoCluster = errors.New("soak: the fleet does not have this cluster now")

// statusError is an HTTP answer that is not 200, from a server that is
// not the API server (the addon's).
type statusError struct{ code int }

func (e statusError) Error() string {
	return fmt.Sprintf("soak: the server answered %d %s", e.code, http.StatusText(e.code))
}

// classify is err's wire.Failure.Kind: what the API server said first
// (its status), then what the connection met.
func classify(err error) string {
	if errors.Is(err, errNoCluster) {
		return kindNoCluster
	}
	if s, ok := errors.AsType[statusError](err); ok {
		return byCode(s.code)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
			return kindTimeout
		}
		if k := byCode(int(status.Status().Code)); k != kindOther {
			return k
		}
	}
	switch {
	case isTLS(err):
		return kindTLS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), isNetTimeout(err):
		return kindTimeout
	case isRefused(err):
		return kindRefused
	}
	return kindOther
}

// byCode is the kind of an HTTP status code.
func byCode(code int) string {
	switch {
	case code == http.StatusUnauthorized:
		return kindUnauthorized
	case code == http.StatusForbidden:
		return kindForbidden
	case code == http.StatusGatewayTimeout:
		return kindTimeout
	case code >= 500:
		return kindServer
	}
	return kindOther
}

func isTLS(err error) bool {
	_, unknown := errors.AsType[x509.UnknownAuthorityError](err)
	_, invalid := errors.AsType[x509.CertificateInvalidError](err)
	_, host := errors.AsType[x509.HostnameError](err)
	_, verify := errors.AsType[*tls.CertificateVerificationError](err)
	_, header := errors.AsType[tls.RecordHeaderError](err)
	_, alert := errors.AsType[tls.AlertError](err)
	return unknown || invalid || host || verify || header || alert
}

func isNetTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// isRefused is a connection that was refused, reset or closed under the
// request: what an API server's restart does to its clients.
func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// maxMessage bounds a Failure's message, in bytes.
const maxMessage = 300

// message is err's text for a Failure, cut to maxMessage bytes on a rune
// boundary. The errors it gets come from client-go, the vault and the
// side's own code, none of which quote a credential.
func message(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
