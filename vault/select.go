package vault

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/login"
	"k8s.io/utils/clock"
)

// Select returns a random usable credential of the highest priority present.
//
// When the vault holds none, Select starts a login (one per handler, however
// many callers wait) and waits for its first credential. It returns a
// *LoginError when the login ends without one, when every handler is backing
// off after a failed login, or when ctx ends first; ErrClosed once the vault
// is closed. It never waits past ctx, and never for a backoff to pass.
func (v *Vault) Select(ctx context.Context) (*Credential, error) {
	if c := v.snap.Load().pick(); c != nil {
		return c, nil
	}
	return v.wait(ctx)
}

// wait is Select's slow path.
func (v *Vault) wait(ctx context.Context) (*Credential, error) {
	for {
		v.mu.Lock()
		if v.closed {
			v.mu.Unlock()
			return nil, ErrClosed
		}
		v.dropExpired()
		if c := v.snap.Load().pick(); c != nil {
			v.mu.Unlock()
			return c, nil
		}
		if !v.settling { // else the round's logins are under way
			v.startDue()
		}
		if !v.loggingIn() {
			err := v.loginError(nil)
			v.mu.Unlock()
			return nil, err
		}
		changed := v.changed
		v.mu.Unlock()

		v.waiting.Add(1)
		v.waited.Add(1)
		select {
		case <-changed:
			v.waiting.Add(-1)
		case <-ctx.Done():
			v.waiting.Add(-1)
			v.mu.Lock()
			err := v.loginError(context.Cause(ctx))
			v.mu.Unlock()
			return nil, err
		}
		if c := v.snap.Load().pick(); c != nil {
			return c, nil
		}
	}
}

// dropExpired removes credentials that are no longer usable; v.mu is held.
func (v *Vault) dropExpired() {
	now := v.clock.Now()
	dropped := false
	var lastUsable time.Time
	for _, h := range v.all() {
		if h.cred != nil && !h.cred.usable(now) {
			if h.cred.usableUntil.After(lastUsable) {
				lastUsable = h.cred.usableUntil
			}
			v.log.V(1).Info("credential expired", "handler", h.settings.ID, "fingerprint", h.cred.fingerprint,
				"expiration", h.cred.Info.Expiration)
			v.drop(h)
			h.loss = login.Reason{Kind: login.Expired}
			dropped = true
		}
	}
	if dropped && v.roundStart.IsZero() && !v.usableLocked() {
		// The vault has had nothing to serve since then, whatever logins
		// (a failing refresh) are under way: Ready counts from it.
		v.roundStart = lastUsable
	}
	// A stale snapshot with nothing expired (the wall clock went back)
	// is published anew, with a new timer.
	if dropped || v.snap.Load().stale.Load() {
		v.publish()
	}
}

// startDue starts a login for each active handler that has no credential
// and is neither logging in nor backing off; v.mu is held. The vault has no usable credential: the
// handlers started make a round whose credentials are held back until each
// has finished its first attempt, or Options.FirstLoginWait has passed, so
// that callers get the highest priority the round gives rather than the
// fastest handler's.
func (v *Vault) startDue() {
	now := v.clock.Now()
	started := false
	for _, h := range v.active() {
		if h.cred == nil && !h.running && !h.retryAt.After(now) {
			v.start(h, h.lossReason())
			if h.running {
				h.firstPending, started = true, true
			}
		}
	}
	if started && v.roundStart.IsZero() {
		v.roundStart = now
	}
	if started && !v.settling && v.opts.FirstLoginWait > 0 && len(v.active()) > 1 {
		v.settling = true
		var timer clock.Timer
		// The callback takes no lock: a fake clock calls it under its own.
		timer = v.clock.AfterFunc(v.opts.FirstLoginWait, func() {
			v.spawn(func() {
				v.mu.Lock()
				defer v.mu.Unlock()
				if v.settling && v.settleTimer == timer {
					v.log.Info("handing out credentials before every handler finished its first attempt: the wait is bounded",
						"firstLoginWait", v.opts.FirstLoginWait, "waitingFor", v.pendingIDs())
					v.endSettlingLocked()
				}
			})
		})
		v.settleTimer = timer
	}
}

// firstAttemptDone notes that h has finished its first attempt of the
// round; the last one releases the round's credentials. v.mu is held.
func (v *Vault) firstAttemptDoneLocked(h *handler) {
	if !h.firstPending {
		return
	}
	h.firstPending = false
	if v.settling && len(v.pendingIDs()) == 0 {
		v.endSettlingLocked()
	}
}

// pendingIDs names the handlers whose first attempt of the round is still
// under way; v.mu is held.
func (v *Vault) pendingIDs() []string {
	var ids []string
	for _, h := range v.all() {
		if h.firstPending {
			ids = append(ids, h.settings.ID)
		}
	}
	return ids
}

// endSettlingLocked hands the round's credentials out; v.mu is held.
func (v *Vault) endSettlingLocked() {
	if v.settleTimer != nil {
		v.settleTimer.Stop()
		v.settleTimer = nil
	}
	if !v.settling {
		return
	}
	v.settling = false
	for _, h := range v.all() {
		h.firstPending = false
	}
	if !v.closed {
		v.publish()
	}
}

// loggingIn tells whether any handler is logging in, or a round's first
// attempts are still being waited for; v.mu is held.
func (v *Vault) loggingIn() bool {
	return v.settling || slices.ContainsFunc(v.all(), func(h *handler) bool { return h.running })
}

// loginError describes why there is no credential; v.mu is held.
func (v *Vault) loginError(callerErr error) *LoginError {
	e := &LoginError{Server: v.lastServer, Cause: v.lastCause, Err: callerErr}
	active := v.active()
	if len(active) == 0 && callerErr == nil {
		e.Err = ErrNoHandlers
	}
	for _, h := range active {
		e.Handlers = append(e.Handlers, Outcome{
			Handler: h.settings.ID,
			Err:     h.outcome,
			Running: h.running,
			Held:    v.settling && h.cred != nil,
			RetryAt: h.retryAt,
		})
	}
	return e
}

// Invalidate removes cred from the vault because the server rejected it;
// cause says why (the 401). It removes exactly that object: a credential
// that its handler has replaced since, or one already invalidated, is left
// alone, so a late 401 cannot remove a fresh credential. The handler's later
// logins may not return the same authentication material again.
//
// Invalidate never blocks. It logs through ctx's logger when ctx has one,
// so the line carries the caller's context. It returns ErrClosed once the
// vault is closed.
func (v *Vault) Invalidate(ctx context.Context, cred *Credential, cause error) error {
	if cred == nil {
		return errors.New("vault: Invalidate of a nil credential")
	}
	if !v.invalidate(ctx, cred, cause, byCaller) && v.isClosed() {
		return ErrClosed
	}
	return nil
}

// invalidate removes cred and tells whether it did: of many callers that
// invalidate the same credential, exactly one does. strike counts it
// against its handler when it never served (see strikeLocked).
func (v *Vault) invalidate(ctx context.Context, cred *Credential, cause error, by invalidation) bool {
	h := cred.handler
	v.mu.Lock()
	if v.closed || h == nil || h.cred != cred {
		v.mu.Unlock()
		return false
	}
	v.drop(h)
	v.lastServer, v.lastCause = cred.Info.Server, cause
	v.metrics.invalidations.WithLabelValues(cred.Key).Inc()
	switch by {
	case byTLSFailure:
		// The token is not at fault but the CA: the handler may give it
		// again with the new CA. Its next login waits for its backoff, so
		// that a CA that has not rotated yet costs a login per backoff,
		// not one per request.
		h.loss = login.Reason{Kind: login.TLSFailure}
		h.outcome = cause
		h.retryAt = v.clock.Now().Add(h.backoff.Step())
	default:
		h.loss = rejection(cause, cred)
		h.forgotten = append(h.forgotten, cred.digest)
		if extra := len(h.forgotten) - v.opts.Remembered; extra > 0 {
			h.forgotten = slices.Delete(h.forgotten, 0, extra)
		}
		if by == by401 {
			v.strikeLocked(h, cred)
		}
	}
	v.publish()
	v.retryAboveLocked(h)
	left := v.snap.Load().size()
	v.mu.Unlock()

	log := v.log
	if l, err := logr.FromContext(ctx); err == nil {
		log = l.WithName("authvault")
	}
	log.V(1).Info("credential invalidated", "handler", cred.Key, "fingerprint", cred.fingerprint,
		"server", cred.Info.Server, "cause", causeText(cause), "left", left)
	return true
}

func (v *Vault) isClosed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.closed
}

func causeText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// lossReason is why h logs in when it has no credential; v.mu is held.
func (h *handler) lossReason() login.Reason {
	if h.loss.Kind == "" {
		return login.Reason{Kind: login.FirstLogin}
	}
	return h.loss
}

// maxChallenge bounds the WWW-Authenticate header a Reason carries: a
// server or a proxy may send megabytes, which an exec plugin's environment
// (128 KiB a string on Linux) or a log line must not carry. A longer one is
// dropped rather than cut, which could change its meaning.
const maxChallenge = 4 << 10

// rejection is the Reason of a login after cred was invalidated for cause:
// with the response's status and challenge when cause is the transport's.
func rejection(cause error, cred *Credential) login.Reason {
	r := login.Reason{Kind: login.Rejected}
	var ue *UnauthorizedError
	if errors.As(cause, &ue) {
		r.StatusCode, r.Challenge = ue.StatusCode, safeChallenge(ue.Challenge, cred)
	}
	return r
}

// safeChallenge is a 401's WWW-Authenticate header as the vault may log it
// and hand it on: "" when it is longer than maxChallenge, or when it
// repeats cred's secret (a gateway's error_description="token … is
// revoked"), which would otherwise reach the log line of the next login.
// It is left out rather than cut or masked, which could change its meaning.
func safeChallenge(challenge string, cred *Credential) string {
	if len(challenge) > maxChallenge {
		return ""
	}
	secrets := []string{cred.Info.Token, cred.Info.Password}
	if r := cred.route; r != nil && len(r.auth) > 0 {
		if _, value, ok := strings.Cut(r.auth[0], " "); ok {
			secrets = append(secrets, value) // basic auth's base64
		}
	}
	for _, secret := range secrets {
		if secret != "" && strings.Contains(challenge, secret) {
			return ""
		}
	}
	return challenge
}

// invalidation says who invalidates a credential, and so what it costs its
// handler.
type invalidation int

const (
	byCaller     invalidation = iota // Vault.Invalidate: the digest is refused for a while
	by401                            // the transport met a 401: refused, and a strike if it never served
	byTLSFailure                     // the transport failed TLS verification: the handler backs off
)

// retryAboveLocked makes sure that h, which has no credential, logs in again
// while credentials of a lower priority than its last one serve: otherwise
// only an empty vault would start its login, and the lower priority (another
// cluster, with the fallback defaults) would serve for good. It starts the
// login now, or arms h's retry timer for its retryAt; v.mu is held.
func (v *Vault) retryAboveLocked(h *handler) {
	s := v.snap.Load()
	if v.closed || h.cred != nil || h.running || len(s.groups) == 0 || !slices.Contains(v.active(), h) ||
		h.lastPriority <= s.groups[0][0].Info.Priority {
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
	v.start(h, h.lossReason())
}
