package vault

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
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

// snapshot is the immutable set of usable credentials that Select reads
// without a lock. A change to the vault publishes a new one.
type snapshot struct {
	// groups holds the credentials by rank, the highest first.
	groups [][]*Credential
	// soonest is the earliest usableUntil of all of them; zero if none
	// expires.
	soonest time.Time
	// stale is set by a timer when soonest passes. Select then takes the
	// slow path, which drops what expired: the hot path reads no clock.
	stale atomic.Bool
	// held tells that a login on an empty vault is still waiting for
	// handlers' first attempts: the credentials are not handed out yet.
	held bool
}

// pick returns a random credential of the highest priority, or nil when the
// snapshot is empty, held back, or may hold an expired credential.
func (s *snapshot) pick() *Credential {
	if len(s.groups) == 0 || s.held || s.stale.Load() {
		return nil
	}
	top := s.groups[0]
	if len(top) == 1 {
		return top[0]
	}
	return top[rand.IntN(len(top))]
}

// routeFor returns the route of a credential for the server b, or nil.
func (s *snapshot) routeFor(b base) *route {
	for _, g := range s.groups {
		for _, c := range g {
			if c.route.base == b {
				return c.route
			}
		}
	}
	return nil
}

func (s *snapshot) size() int {
	n := 0
	for _, g := range s.groups {
		n += len(g)
	}
	return n
}

// newSnapshot groups creds by descending rank.
func newSnapshot(creds []*Credential) *snapshot {
	if len(creds) == 0 {
		// A new one each time, never one shared by every vault: the
		// caller sets held on it.
		return &snapshot{}
	}
	creds = slices.Clone(creds)
	slices.SortStableFunc(creds, func(a, b *Credential) int { return compareRanks(b.rank(), a.rank()) })
	s := &snapshot{}
	for i, c := range creds {
		if i == 0 || c.rank() != creds[i-1].rank() {
			s.groups = append(s.groups, nil)
		}
		last := len(s.groups) - 1
		s.groups[last] = append(s.groups[last], c)
		if !c.usableUntil.IsZero() && (s.soonest.IsZero() || c.usableUntil.Before(s.soonest)) {
			s.soonest = c.usableUntil
		}
	}
	return s
}
