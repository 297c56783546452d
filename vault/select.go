package vault

import (
	"context"
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/authvault/authvault/login"
)

// Select returns a random usable credential of the highest priority present.
//
// When the vault holds none, Select starts a login (one per handler, however
// many callers wait) and waits for its first credential. It returns a
// *LoginError when the login ends without one, when every handler is backing
// off after a failed login, when ctx ends first, or when it has waited
// Options.MaxWait (the error then wraps ErrMaxWait, and the login goes on);
// ErrClosed once the vault is closed. It never waits past ctx or MaxWait,
// and never for a backoff to pass.
func (v *Vault) Select(ctx context.Context) (*Credential, error) {
	v.noteAsked()
	if c := v.snap.Load().pick(); c != nil {
		return c, nil
	}
	return v.wait(ctx)
}

// wait is Select's slow path. Its bound (Options.MaxWait) runs on the
// vault's clock from the first time it blocks.
func (v *Vault) wait(ctx context.Context) (*Credential, error) {
	var bound <-chan time.Time // nil, which never fires, until it blocks
	for {
		v.mu.Lock()
		if v.closed {
			v.mu.Unlock()
			return nil, ErrClosed
		}
		v.dropExpiredLocked()
		if c := v.snap.Load().pick(); c != nil {
			v.mu.Unlock()
			return c, nil
		}
		if !v.first.settling { // else the round's logins are under way
			v.startDueLocked()
		}
		if !v.loggingInLocked() {
			err := v.loginErrorLocked(nil)
			v.mu.Unlock()
			return nil, err
		}
		changed := v.changed
		v.mu.Unlock()

		if bound == nil && v.opts.MaxWait > 0 {
			t := v.clock.NewTimer(v.opts.MaxWait)
			defer t.Stop()
			bound = t.C()
		}
		v.waits.waiting.Add(1)
		v.waits.waited.Add(1)
		var callerErr error
		select {
		case <-changed:
		case <-ctx.Done():
			callerErr = context.Cause(ctx)
		case <-bound:
			callerErr = &maxWaitError{wait: v.opts.MaxWait}
		}
		v.waits.waiting.Add(-1)
		if callerErr != nil {
			v.mu.Lock()
			err := v.loginErrorLocked(callerErr)
			v.mu.Unlock()
			return nil, err
		}
		if c := v.snap.Load().pick(); c != nil {
			return c, nil
		}
	}
}

// dropExpiredLocked removes credentials that are no longer usable.
func (v *Vault) dropExpiredLocked() {
	now := v.clock.Now()
	dropped := false
	var lastUsable time.Time
	for _, h := range v.allLocked() {
		if h.cred != nil && !h.cred.usable(now) {
			if h.cred.usableUntil.After(lastUsable) {
				lastUsable = h.cred.usableUntil
			}
			v.log.V(1).Info("credential expired", "handler", h.settings.ID, "fingerprint", h.cred.fingerprint,
				"expiration", expirationValue(h.cred.Info.Expiration))
			v.dropLocked(h)
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
		v.publishLocked()
	}
}

// startDueLocked starts a login for each active handler that has no credential
// and is neither logging in nor backing off. The vault has no usable credential: the
// handlers started make a round whose credentials are held back until each
// has finished its first attempt, or Options.FirstLoginWait has passed, so
// that callers get the highest priority the round gives rather than the
// fastest handler's.
func (v *Vault) startDueLocked() {
	now := v.clock.Now()
	started := false
	for _, h := range v.activeLocked() {
		if h.cred == nil && !h.running && !h.retryAt.After(now) {
			v.startLocked(h, h.lossReason())
			if h.running {
				h.firstPending, started = true, true
			}
		}
	}
	if started && v.roundStart.IsZero() {
		v.roundStart = now
	}
	if started && !v.first.settling && v.opts.FirstLoginWait > 0 && len(v.activeLocked()) > 1 {
		v.first.settling = true
		var timer clock.Timer
		// The callback takes no lock: a fake clock calls it under its own.
		timer = v.clock.AfterFunc(v.opts.FirstLoginWait, func() {
			v.spawn(func() {
				v.mu.Lock()
				defer v.mu.Unlock()
				if v.first.settling && v.first.timer == timer {
					v.log.Info("handing out credentials before every handler finished its first attempt: the wait is bounded",
						"firstLoginWait", v.opts.FirstLoginWait, "waitingFor", v.pendingIDsLocked())
					v.endSettlingLocked()
				}
			})
		})
		v.first.timer = timer
	}
}

// firstAttemptDoneLocked notes that h has finished its first attempt of the
// round; the last one releases the round's credentials.
func (v *Vault) firstAttemptDoneLocked(h *handler) {
	if !h.firstPending {
		return
	}
	h.firstPending = false
	if v.first.settling && len(v.pendingIDsLocked()) == 0 {
		v.endSettlingLocked()
	}
}

// pendingIDsLocked names the handlers whose first attempt of the round is still
// under way.
func (v *Vault) pendingIDsLocked() []string {
	var ids []string
	for _, h := range v.allLocked() {
		if h.firstPending {
			ids = append(ids, h.settings.ID)
		}
	}
	return ids
}

// endSettlingLocked hands the round's credentials out.
func (v *Vault) endSettlingLocked() {
	if v.first.timer != nil {
		v.first.timer.Stop()
		v.first.timer = nil
	}
	if !v.first.settling {
		return
	}
	v.first.settling = false
	for _, h := range v.allLocked() {
		h.firstPending = false
	}
	if !v.closed {
		v.publishLocked()
	}
}

// loggingInLocked tells whether any handler is logging in, or a round's first
// attempts are still being waited for.
func (v *Vault) loggingInLocked() bool {
	return v.first.settling || slices.ContainsFunc(v.allLocked(), func(h *handler) bool { return h.running })
}

// loginErrorLocked describes why there is no credential.
func (v *Vault) loginErrorLocked(callerErr error) *LoginError {
	e := &LoginError{Server: v.lastLoss.server, Cause: v.lastLoss.cause, Err: callerErr}
	active := v.activeLocked()
	if len(active) == 0 && callerErr == nil {
		e.Err = ErrNoHandlers
	}
	for _, h := range active {
		e.Handlers = append(e.Handlers, Outcome{
			Handler: h.settings.ID,
			Err:     h.outcome,
			Running: h.running,
			Held:    v.first.settling && h.cred != nil,
			RetryAt: h.retryAt,
		})
	}
	return e
}

func (v *Vault) isClosed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.closed
}
