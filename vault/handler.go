package vault

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// handler is a registered login.Handler and its state in the vault. What
// changes that state between logins lives in this file: a credential
// serving (served), a rejected one counting against it (strikeLocked), a
// higher priority without credential logging in again (retryAboveLocked).
// Logins themselves are in login.go, invalidation in invalidate.go.
type handler struct {
	fn       login.Handler
	settings handlerconf.Settings

	// Guarded by Vault.mu.
	cred        *Credential         // its current credential, or nil
	running     bool                // a login is under way
	outcome     error               // the last login's error; nil after success
	backoff     wait.Backoff        // delays between failed logins
	retryAt     time.Time           // no new login before this
	invalidated [][sha256.Size]byte // digests of its recently invalidated credentials
	// strikes counts its credentials in a row that the server rejected
	// before they served a request; one that serves resets it.
	strikes int
	// lastCall is when its last call started, on the vault's clock: the
	// next login starts no earlier than settings.BackoffInitial after it.
	lastCall time.Time
	// returned is closed when its last call returns, which may be long
	// after an attempt abandoned it: the next call waits for it, so that
	// a handler never runs concurrently with itself.
	returned chan struct{}
	// abandoned tells that an attempt gave up on that last call at its
	// timeout (authvault_abandoned_calls shows it until the call returns).
	abandoned bool
	// lastRank is the rank of its last credential, and retryTimer
	// starts its next login at retryAt while lower priorities serve (see
	// Vault.retryAboveLocked).
	lastRank   rank
	retryTimer clock.Timer
	// loss is why it last lost its credential; zero while it never had
	// one. Its next login tells the handler (login.ReasonFrom).
	loss login.Reason
	// firstPending tells that it is in a login round on an empty vault and
	// has not finished its first attempt: the round's credentials are held
	// back until it has (see Vault.first).
	firstPending bool
	// fallback tells that it came from Options.Fallback: its credentials
	// rank below a registered handler's.
	fallback bool
}

// newHandler configures h with a unique ID; v.mu is held or v is new.
func (v *Vault) newHandler(h login.Handler, opts []login.Option) *handler {
	s := configure(h, opts...)
	id := s.ID
	for n := 2; v.lookupLocked(id) != nil; n++ {
		id = s.ID + "#" + strconv.Itoa(n)
	}
	s.ID = id
	// Until it gives a credential, it ranks as one of priority 0 would:
	// a registered handler above every fallback (see retryAboveLocked).
	return &handler{fn: v.tracked(h), settings: s, backoff: newBackoff(s), lastRank: rankOf(nil, 0)}
}

// configure applies opts over the defaults for h.
func configure(h login.Handler, opts ...login.Option) handlerconf.Settings {
	return handlerconf.Configure(h, opts...)
}

// tracked wraps h so that Close can wait for its calls, which run in
// goroutines of their own (see callHandler).
func (v *Vault) tracked(h login.Handler) login.Handler {
	return func(ctx context.Context) (*login.ConnectionInfo, error) {
		v.life.spawnMu.Lock()
		if v.life.stopping {
			v.life.spawnMu.Unlock()
			return nil, ErrClosed
		}
		v.life.calls.Add(1)
		v.life.spawnMu.Unlock()
		defer v.life.calls.Done()
		return h(ctx)
	}
}

func newBackoff(s handlerconf.Settings) wait.Backoff {
	return wait.Backoff{
		Duration: s.BackoffInitial,
		Factor:   2,
		Jitter:   0.2,
		Steps:    64, // bounded by Cap long before these run out
		Cap:      s.BackoffMax,
	}
}

// lossReason is why h logs in when it has no credential.
func (h *handler) lossReason() login.Reason {
	if h.loss.Kind == "" {
		return login.Reason{Kind: login.FirstLogin}
	}
	return h.loss
}

// served notes that cred got an answer other than 401. The first time, its
// handler's strikes, or its TLS failures, and their backoff are cleared: it
// gives credentials that work, so the next rejection is an ordinary
// revocation.
func (v *Vault) served(cred *Credential) {
	if cred.served.Load() || !cred.served.CompareAndSwap(false, true) {
		return
	}
	h := cred.owner
	if h == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if h.strikes == 0 && h.loss.Kind != login.TLSFailure {
		return
	}
	h.strikes, h.loss = 0, login.Reason{}
	h.backoff = newBackoff(h.settings)
	if errors.Is(h.outcome, errRejectedAtOnce) {
		h.outcome, h.retryAt = nil, time.Time{}
	}
}

// strikeLocked counts cred, just invalidated, against its handler when the
// server rejected it before it served a request. The second strike in a
// row makes the handler back off: an authenticator outage, or a handler
// minting bad credentials, then gives callers a LoginError at once rather
// than costing a login per request. One is let go: a token can have been
// revoked before its first use. It tells whether the handler backs off.
func (v *Vault) strikeLocked(h *handler, cred *Credential) bool {
	if cred.served.Load() {
		return false
	}
	h.strikes++
	if h.strikes < 2 || h.running {
		return false
	}
	h.outcome = errRejectedAtOnce
	h.retryAt = v.clock.Now().Add(h.backoff.Step())
	v.broadcastLocked()
	return true
}

// retryAboveLocked makes sure that h, which has no credential, logs in again
// while credentials of a lower priority than its last one serve: otherwise
// only an empty vault would start its login, and the lower priority (another
// cluster, with the fallback defaults) would serve for good. It starts the
// login now, or arms h's retry timer for its retryAt.
func (v *Vault) retryAboveLocked(h *handler) {
	s := v.snap.Load()
	if v.closed || h.cred != nil || h.running || len(s.groups) == 0 || !slices.Contains(v.activeLocked(), h) ||
		compareRanks(h.lastRank, s.groups[0][0].rank()) <= 0 {
		return
	}
	if wait := h.retryAt.Sub(v.clock.Now()); wait > 0 {
		if h.retryTimer != nil {
			h.retryTimer.Stop()
		}
		// The callback takes no lock: a fake clock calls it under its own.
		h.retryTimer = v.clock.AfterFunc(wait, func() {
			v.spawn(func() {
				v.mu.Lock()
				defer v.mu.Unlock()
				v.retryAboveLocked(h)
			})
		})
		return
	}
	v.startLocked(h, h.lossReason())
}
