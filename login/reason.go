package login

import (
	"context"
	"fmt"
)

// Reason says why the vault runs a handler. A handler reads it with
// ReasonFrom: one that caches its credential can skip the cache after a
// rejection, one that asks a remote service can tell it why.
type Reason struct {
	Kind ReasonKind
	// StatusCode and Challenge are those of the response that rejected the
	// handler's previous credential (Kind Rejected): its status code and its
	// WWW-Authenticate header. Zero when the credential was invalidated by
	// a caller of Vault.Invalidate without the response. The vault leaves
	// out a Challenge longer than 4 KiB, or one that repeats the rejected
	// credential's token or password: it logs the Reason.
	StatusCode int
	Challenge  string
}

// ReasonKind is what made the vault log in.
type ReasonKind string

// The kinds of Reason.
const (
	// FirstLogin: the handler has not given a credential yet.
	FirstLogin ReasonKind = "first login"
	// Refresh: its credential still serves but expires soon.
	Refresh ReasonKind = "refresh before expiry"
	// Reread: its credential still serves and does not expire soon; the
	// handler asked to be called again by now (ConnectionInfo.RefreshAfter),
	// to read its source again.
	Reread ReasonKind = "reread as RefreshAfter asked"
	// Rejected: the server rejected its credential (an HTTP 401).
	Rejected ReasonKind = "rejected by the server"
	// Expired: its credential expired before a refresh replaced it.
	Expired ReasonKind = "expired"
	// TLSFailure: the server's certificate failed verification against the
	// credential's CA, or the server refused its client certificate: a CA
	// rotated, and the handler should give the new one.
	TLSFailure ReasonKind = "TLS failure"
)

func (r Reason) String() string {
	switch {
	case r.Kind == "":
		return "unknown"
	case r.Kind == Rejected && r.StatusCode != 0 && r.Challenge != "":
		return fmt.Sprintf("%s (%d, WWW-Authenticate: %s)", r.Kind, r.StatusCode, r.Challenge)
	case r.Kind == Rejected && r.StatusCode != 0:
		return fmt.Sprintf("%s (%d)", r.Kind, r.StatusCode)
	default:
		return string(r.Kind)
	}
}

type reasonKey struct{}

// WithReason returns ctx carrying r, which ReasonFrom reads. It is exported
// for the vault, which calls every handler with such a context, and for the
// tests of a handler, which call it as the vault would; a handler itself
// only reads its Reason.
func WithReason(ctx context.Context, r Reason) context.Context {
	return context.WithValue(ctx, reasonKey{}, r)
}

// ReasonFrom returns why the vault runs the handler that ctx was given to,
// and false for a context that does not say (a handler called by other
// code).
func ReasonFrom(ctx context.Context) (Reason, bool) {
	r, ok := ctx.Value(reasonKey{}).(Reason)
	return r, ok
}
