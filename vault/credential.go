package vault

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/authvault/authvault/login"
)

// Credential is one credential held by the vault. The vault hands out the
// same *Credential to every caller that selects it, and identifies it by
// pointer: Invalidate removes exactly the object it is given.
//
// Its fields are read-only.
type Credential struct {
	// Handler is the ID of the handler that returned the credential.
	Handler string
	// Info is what the handler returned.
	Info *login.ConnectionInfo

	// owner is the handler that returned it; nil for a Credential the
	// vault did not make.
	owner       *handlerState
	digest      [sha256.Size]byte
	fingerprint string
	// whence is where a built-in handler said the credential came from
	// (internal/whence), for the line that says a fallback serves; "" if
	// it said nothing.
	whence string
	// usableUntil is when the vault stops handing the credential out: its
	// expiration less the leeway. Zero: never.
	usableUntil time.Time
	// route is how the transport sends requests with it.
	route *route
	// served is set once a request with it got an answer other than 401:
	// a credential rejected before that points at its handler or the
	// authenticator, not at the credential's age.
	served atomic.Bool
}

// Fingerprint names the credential in logs without revealing it.
func (c *Credential) Fingerprint() string { return c.fingerprint }

// String shows the handler, the fingerprint and the redacted ConnectionInfo.
func (c *Credential) String() string {
	if c == nil {
		return "<nil>"
	}
	return "vault.Credential{Handler: " + strconv.Quote(c.Handler) + ", Info: " + c.Info.String() + "}"
}

// GoString makes %#v show the redacted form.
func (c *Credential) GoString() string { return c.String() }

// Format makes every fmt verb print the redacted form.
func (c *Credential) Format(f fmt.State, verb rune) {
	s := c.String()
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	_, _ = f.Write([]byte(s))
}

// MarshalLog implements logr.Marshaler with the redacted form.
func (c *Credential) MarshalLog() any {
	if c == nil {
		return nil
	}
	return map[string]any{"handler": c.Handler, "info": c.Info.MarshalLog()}
}

// rank orders credentials for selection: a registered handler's above a
// fallback handler's (see Options.KeepFallback), then by Priority.
type rank struct {
	registered bool
	priority   int
}

// rank is the credential's rank; its owner is nil for a Credential the
// vault did not make.
func (c *Credential) rank() rank {
	return rank{registered: c.owner == nil || !c.owner.fallback, priority: c.Info.Priority}
}

// compareRanks is positive when a ranks above b.
func compareRanks(a, b rank) int {
	if a.registered != b.registered {
		if a.registered {
			return 1
		}
		return -1
	}
	return cmp.Compare(a.priority, b.priority)
}

// usable tells whether the vault may still hand the credential out at now.
func (c *Credential) usable(now time.Time) bool {
	return c.usableUntil.IsZero() || now.Before(c.usableUntil)
}
