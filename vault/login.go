package vault

import (
	"errors"
	"slices"
	"time"

	"github.com/authvault/authvault/login"
)

// Refresh window: a credential that expires is refreshed when a tenth of its
// usable lifetime is left, at least refreshWindowMin but never more than half
// of it, moved earlier by a random part of up to half the window so that
// replicas of an operator do not log in together.
const (
	refreshWindowMin  = 30 * time.Second
	refreshWindowPart = 10
)

// start begins a login of h in the background; v.mu is held.
func (v *Vault) start(h *handler, reason string) {
	h.running = true
	if !v.spawn(func() { v.login(h, reason) }) {
		h.running = false
	}
}

// login runs h's attempts until one gives a credential the vault accepts,
// the handler's retries run out, or the vault closes.
func (v *Vault) login(h *handler, reason string) {
	log := v.log.WithValues("handler", h.settings.ID)
	log.V(1).Info("logging in", "reason", reason)
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := v.attempt(h)
		v.metrics.attempt(h.settings.ID, result(err), time.Since(start))
		if err == nil {
			return
		}
		if v.ctx.Err() != nil {
			v.finish(h, err, 0)
			return
		}
		delay := v.nextDelay(h, err)
		if !retryable(err) || (h.settings.Retries != login.Unlimited && attempt > h.settings.Retries) {
			v.finish(h, err, delay)
			return
		}
		log.Error(err, "login attempt failed", "attempt", attempt, "retryIn", delay)
		v.mu.Lock()
		h.outcome = err
		v.mu.Unlock()
		if !v.sleep(delay) {
			v.finish(h, err, 0)
			return
		}
	}
}

// attempt runs h once and offers its credential to the vault.
func (v *Vault) attempt(h *handler) error {
	info, err := h.settings.Attempt(v.ctx, h.fn)
	if err != nil {
		return err
	}
	if info == nil {
		return ErrNoCredential
	}
	r, err := newRoute(info, v.pool)
	if err != nil {
		return err
	}
	if err := v.accept(h, info, r); err != nil {
		r.release(v.pool)
		return err
	}
	return nil
}

// retryable tells whether another attempt could give a different result.
func retryable(err error) bool {
	var permanent *login.PermanentError
	return !errors.Is(err, ErrNoCredential) && !errors.As(err, &permanent)
}

// nextDelay is how long to wait after a failed attempt: what a Temporary
// error asks for, else the handler's next backoff step.
func (v *Vault) nextDelay(h *handler, err error) time.Duration {
	var temporary *login.TemporaryError
	if errors.As(err, &temporary) && temporary.Delay > 0 {
		return temporary.Delay
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return h.backoff.Step()
}

// sleep waits d on the vault's clock; false if the vault closed first.
func (v *Vault) sleep(d time.Duration) bool {
	t := v.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-v.ctx.Done():
		return false
	}
}

// accept takes info from h as its new credential, unless the vault must
// refuse it; the refusal is the error.
func (v *Vault) accept(h *handler, info *login.ConnectionInfo, r *route) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return ErrClosed
	}
	now := v.clock.Now()
	c := &Credential{Key: h.settings.ID, Info: info, digest: info.Digest(), fingerprint: info.Fingerprint(), route: r}
	if slices.Contains(h.forgotten, c.digest) {
		return ErrRejected
	}
	if info.Expires() {
		life := info.Expiration.Sub(now)
		if life <= 0 {
			return ErrExpired
		}
		c.usableUntil = info.Expiration.Add(-min(v.opts.Leeway, life/4))
	}
	if old := h.cred; old != nil && old.digest == c.digest && old.Info.Expiration.Equal(info.Expiration) {
		return ErrUnchanged
	}
	v.drop(h)
	h.cred = c
	h.running, h.outcome, h.retryAt = false, nil, time.Time{}
	h.backoff = newBackoff(h.settings)
	refreshAt := v.scheduleRefresh(h, c, now)
	v.addBase(r.base())
	v.publish()
	v.log.V(1).Info("credential added", "handler", h.settings.ID, "fingerprint", c.fingerprint,
		"server", info.Server, "priority", info.Priority, "expiration", info.Expiration, "refreshAt", refreshAt)
	return nil
}

// finish ends a login of h that gave no credential, and schedules the next
// one no earlier than delay from now; v.mu is not held.
func (v *Vault) finish(h *handler, err error, delay time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	h.running, h.outcome = false, err
	now := v.clock.Now()
	h.retryAt = now.Add(delay)
	if c := h.cred; c != nil && !c.usableUntil.IsZero() && !v.closed {
		// A failed refresh: try again after the backoff while the old
		// credential keeps serving.
		v.armRefresh(h, c, delay)
	}
	v.broadcast()
	switch {
	case v.closed:
	case errors.Is(err, ErrNoCredential):
		v.log.V(1).Info("login gave no credential", "handler", h.settings.ID, "retryAt", h.retryAt)
	default:
		v.log.Error(err, "login failed", "handler", h.settings.ID, "retryAt", h.retryAt)
	}
}

// scheduleRefresh arms the proactive refresh of c, if it expires; v.mu is held.
func (v *Vault) scheduleRefresh(h *handler, c *Credential, now time.Time) time.Time {
	if c.usableUntil.IsZero() {
		return time.Time{}
	}
	life := c.usableUntil.Sub(now)
	window := min(max(life/refreshWindowPart, refreshWindowMin), life/2)
	lead := window + time.Duration(v.jitter(int64(window/2)+1))
	v.armRefresh(h, c, life-lead)
	return now.Add(life - lead)
}

// armRefresh (re)sets c's refresh timer to fire after d; v.mu is held. The
// callback takes no lock of the vault: a fake clock calls it under its own.
func (v *Vault) armRefresh(h *handler, c *Credential, d time.Duration) {
	if c.refresh != nil {
		c.refresh.Stop()
	}
	c.refresh = v.clock.AfterFunc(d, func() {
		v.spawn(func() { v.refresh(h, c) })
	})
}

// refresh logs h in again while its credential c still serves.
func (v *Vault) refresh(h *handler, c *Credential) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || h.cred != c || h.running {
		return
	}
	v.start(h, "refresh before expiry")
}
