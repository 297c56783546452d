package vault

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/internal/redact"
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

// startLocked begins a login of h in the background.
func (v *Vault) startLocked(h *handler, reason login.Reason) {
	h.running = true
	if !v.spawn(func() { v.login(h, reason) }) {
		h.running = false
	}
}

// login runs h's attempts until one gives a credential the vault accepts,
// the handler's retries run out, or the vault closes. It starts no earlier
// than the handler's initial backoff after its previous call (the login
// floor), so that credentials that live a few milliseconds cannot make a
// handler run in a loop.
//
// Its log lines carry the handler and the reason; an attempt's, its number
// too, and the handler gets that logger in its context.
func (v *Vault) login(h *handler, reason login.Reason) {
	log := v.log.WithValues("handler", h.settings.ID, "reason", reason.String())
	switch {
	case reason.Kind == login.Refresh:
		log.V(1).Info("logging in") // routine: its end is at INFO
	case v.gaveNothing(h):
		// Asked again after its backoff (a handler of one's own beside
		// the fallback): INFO said so once, and says when it gives one.
		log.V(1).Info("logging in")
	default:
		log.Info("logging in")
	}
	ctx := login.WithReason(v.life.ctx, reason)
	if !v.sleep(v.untilFloor(h)) {
		v.finish(h, log, ErrClosed, 0)
		return
	}
	for attempt := 1; ; attempt++ {
		log := log.WithValues("attempt", attempt)
		if err := v.awaitReturn(h, log); err != nil {
			v.finish(h, log, err, v.nextDelay(h, err))
			return
		}
		start := time.Now()
		err := v.attempt(logr.NewContext(ctx, log), h, log)
		v.metrics.attempt(h.settings.ID, result(err), time.Since(start))
		if err == nil {
			return // accept ended the first attempt, under the same lock
		}
		if attempt == 1 {
			// h is still running: no next round can have marked it since.
			v.mu.Lock()
			v.firstAttemptDoneLocked(h)
			v.mu.Unlock()
		}
		if v.life.ctx.Err() != nil {
			v.finish(h, log, err, 0)
			return
		}
		delay := v.nextDelay(h, err)
		if !retryable(err) || (h.settings.Retries != login.Unlimited && attempt > h.settings.Retries) {
			v.finish(h, log, err, delay)
			return
		}
		log.Error(redact.Error(err), "login attempt failed", "retryIn", delay)
		v.mu.Lock()
		h.outcome = err
		v.mu.Unlock()
		if !v.sleep(delay) {
			v.finish(h, log, err, 0)
			return
		}
	}
}

// gaveNothing tells whether h's last login ended with nothing from it.
func (v *Vault) gaveNothing(h *handler) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return errors.Is(h.outcome, errNoCredential)
}

// untilFloor is how long h's next login must wait for the login floor.
func (v *Vault) untilFloor(h *handler) time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if h.lastCall.IsZero() {
		return 0
	}
	return h.lastCall.Add(h.settings.BackoffInitial).Sub(v.clock.Now())
}

// awaitReturn makes sure that h's last call has returned before h is called
// again: a call that an attempt abandoned at its timeout may still run, and
// a handler must never run concurrently with itself. It waits for that call
// at most one more timeout; if the call is still running then, the login
// ends with errStillRunning, so that waiting callers get a LoginError
// rather than wait on a handler that may never return. It returns ErrClosed
// if the vault closes first.
func (v *Vault) awaitReturn(h *handler, log logr.Logger) error {
	v.mu.Lock()
	returned := h.returned
	v.mu.Unlock()
	if returned == nil {
		return nil
	}
	select {
	case <-returned:
		return nil
	default:
	}
	log.Info("waiting for the handler's abandoned call to return before calling it again: the handler ignores its context",
		"timeout", h.settings.Timeout)
	t := v.clock.NewTimer(h.settings.Timeout)
	defer t.Stop()
	select {
	case <-returned:
		return nil
	case <-t.C():
		return &abandonedError{handler: h.settings.ID, timeout: h.settings.Timeout, again: true}
	case <-v.life.ctx.Done():
		return ErrClosed
	}
}

// attempt runs h once, with ctx, and offers its credential to the vault;
// log is the attempt's.
func (v *Vault) attempt(ctx context.Context, h *handler, log logr.Logger) error {
	returned := make(chan struct{})
	v.mu.Lock()
	h.returned, h.lastCall, h.abandoned = returned, v.clock.Now(), false
	v.mu.Unlock()
	info, err := callHandler(ctx, h.settings, func(ctx context.Context) (*login.ConnectionInfo, error) {
		defer close(returned)
		return h.fn(ctx)
	})
	if err != nil {
		if errors.Is(err, login.ErrAbandoned) {
			v.mu.Lock()
			h.abandoned = true
			v.mu.Unlock()
		}
		return err
	}
	if info == nil {
		return errNoCredential
	}
	r, err := newRoute(info, v.pool)
	if err != nil {
		return err
	}
	if err := v.accept(h, info, r, log); err != nil {
		r.release(v.pool)
		return err
	}
	return nil
}

// retryable tells whether another attempt within the login could give a
// different result. A handler that has nothing, nothing but a credential the
// server has just rejected (a static token), an expired one (a token file no
// one rotates) or the one it had, is asked again only after its backoff:
// retrying at once would give the same, and waiting callers, some without a
// deadline, get a LoginError instead.
func retryable(err error) bool {
	var permanent *login.PermanentError
	for _, final := range []error{errNoCredential, errInvalidated, errExpired, errUnchanged, errStillRunning} {
		if errors.Is(err, final) {
			return false
		}
	}
	return !errors.As(err, &permanent)
}

// nextDelay is how long to wait after a failed attempt: what a Temporary
// error asks for, else the handler's next backoff step, but during a
// failed refresh no more than half the time its credential has left (and
// no less than the login floor): the retries grow denser as the expiry
// nears, so that an issuer outage that ends before the credential does is
// caught before callers find the vault empty, however far the backoff has
// grown. A capped retry leaves the backoff where it was.
func (v *Vault) nextDelay(h *handler, err error) time.Duration {
	var temporary *login.TemporaryError
	if errors.As(err, &temporary) && temporary.Delay > 0 {
		return temporary.Delay
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	next := h.backoff // a copy: a capped retry leaves h.backoff as it was
	d := next.Step()
	if c := h.cred; c != nil && !c.usableUntil.IsZero() {
		if left := c.usableUntil.Sub(v.clock.Now()); left > 0 && max(h.settings.BackoffInitial, left/2) < d {
			// A retry the expiry brings forward does not grow the
			// backoff: past the expiry, the retries go on from the step
			// the uncapped ones reached, not from BackoffMax.
			return max(h.settings.BackoffInitial, left/2)
		}
	}
	h.backoff = next
	return d
}

// sleep waits d on the vault's clock; false if the vault closed first.
func (v *Vault) sleep(d time.Duration) bool {
	if d <= 0 {
		return v.life.ctx.Err() == nil
	}
	t := v.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-v.life.ctx.Done():
		return false
	}
}

// accept takes info from h as its new credential, unless the vault must
// refuse it; the refusal is the error. log is the attempt's.
func (v *Vault) accept(h *handler, info *login.ConnectionInfo, r *route, log logr.Logger) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return ErrClosed
	}
	now := v.clock.Now()
	c := &Credential{Handler: h.settings.ID, Info: info, owner: h, digest: handlerconf.Digest(info), fingerprint: info.Fingerprint(), route: r}
	if slices.Contains(h.invalidated, c.digest) {
		return errInvalidated
	}
	if !info.Expiration.IsZero() {
		life := info.Expiration.Sub(now)
		if life <= 0 {
			return errExpired
		}
		c.usableUntil = info.Expiration.Add(-min(v.opts.Leeway, life/4))
	}
	if old := h.cred; old != nil && old.digest == c.digest && old.Info.Expiration.Equal(info.Expiration) {
		return errUnchanged
	}
	if old := h.cred; old != nil {
		// A handler whose new credential has another TLS identity (a
		// reissued client certificate) will not bring the old one back:
		// it skips the grace kept for a re-login with the same identity.
		v.dropLocked(h)
		v.pool.superseded(old.route, r)
	}
	h.cred, h.lastRank = c, c.rank()
	if h.retryTimer != nil {
		h.retryTimer.Stop()
		h.retryTimer = nil
	}
	h.running, h.outcome, h.retryAt = false, nil, time.Time{}
	v.roundStart = time.Time{}
	// A rejection before this credential no longer says why the vault may
	// run empty: a LoginError names one only if no credential came since.
	v.lastLoss = lastRejection{}
	refreshAt := v.scheduleRefreshLocked(h, c, now)
	v.addBaseLocked(r.base)
	// Before publishing (here or at the end of a first-login wait), which
	// logs whose credentials are handed out.
	log.Info("logged in", withTime([]any{"fingerprint", c.fingerprint, "server", info.Server,
		"priority", info.Priority, "expiration", expirationValue(info.Expiration)}, "refreshAt", refreshAt)...)
	// In the same critical section as installing the credential: once the
	// lock is let go, the credential may be gone and h in the next round,
	// whose first attempt a late mark would end.
	v.firstAttemptDoneLocked(h)
	v.publishLocked()
	return nil
}

// finish ends a login of h that gave no credential, and schedules the next
// one no earlier than delay from now; v.mu is not held. log is the login's.
func (v *Vault) finish(h *handler, log logr.Logger, err error, delay time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.firstAttemptDoneLocked(h) // a login that ended before its first attempt
	again := errors.Is(h.outcome, errNoCredential) && errors.Is(err, errNoCredential)
	h.running, h.outcome = false, err
	now := v.clock.Now()
	h.retryAt = now.Add(delay)
	var refreshAt time.Time
	if c := h.cred; c != nil && !c.usableUntil.IsZero() && !v.closed {
		// A failed refresh: try again after the backoff while the old
		// credential keeps serving.
		v.armRefreshLocked(h, c, delay)
		refreshAt = h.retryAt
	}
	v.retryAboveLocked(h) // a higher priority that failed: not only on an empty vault
	v.broadcastLocked()
	var kv []any // what serves meanwhile: h's credential, if a refresh failed
	if c := h.cred; c != nil {
		kv = []any{"fingerprint", c.fingerprint, "servesUntil", expirationValue(c.usableUntil)}
	}
	switch {
	case v.closed:
	case errors.Is(err, errNoCredential):
		// Once at INFO: a handler that gives nothing for good (its store
		// is not set up, and a fallback serves) is asked every BackoffMax.
		if again {
			log = log.V(1)
		}
		log.Info("login gave no credential", append(kv, "retryAt", h.retryAt.Round(0))...)
	case errors.Is(err, errUnchanged):
		// A Secret rewritten with the same token, a token file touched:
		// nothing failed, and the credential serves on.
		log.V(1).Info("logged in: the credential is unchanged", withTime(kv, "refreshAt", refreshAt)...)
	default:
		log.Error(redact.Error(err), "login failed", append(kv, "retryAt", h.retryAt.Round(0))...)
	}
}

// scheduleRefreshLocked arms the proactive refresh of c, if it expires, and
// resets h's backoff when c is sound and h has no strikes or TLS failure
// against it (those are cleared by a credential that serves).
//
// A credential whose refresh would come sooner than the login floor is
// refreshed at the floor when it still serves then. One that would not
// outlive the floor arrived inside its own refresh window (it lives a few
// milliseconds, or a source hands out the same short remainder again):
// refreshing it soon would only repeat that, so its refresh waits for the
// handler's next backoff step instead, and the backoff keeps growing until
// a sound credential comes. A credential from a handler with strikes resets nothing either:
// only one that serves does (see served).
func (v *Vault) scheduleRefreshLocked(h *handler, c *Credential, now time.Time) time.Time {
	var delay time.Duration
	sound := true
	if !c.usableUntil.IsZero() {
		life := c.usableUntil.Sub(now)
		window := min(max(life/refreshWindowPart, refreshWindowMin), life/2)
		delay = life - window - time.Duration(v.jitter(int64(window/2)+1))
		switch {
		case life <= h.settings.BackoffInitial:
			sound = false
			delay = max(delay, h.backoff.Step())
		case delay < h.settings.BackoffInitial:
			delay = h.settings.BackoffInitial // the login floor; it still serves then
		}
	}
	if sound && h.strikes == 0 && h.loss.Kind != login.TLSFailure {
		h.backoff = newBackoff(h.settings)
	}
	if c.usableUntil.IsZero() {
		return time.Time{}
	}
	if !sound {
		v.log.V(1).Info("credential expires within its refresh window: its refresh backs off", "handler", h.settings.ID,
			"fingerprint", c.fingerprint, "expiration", expirationValue(c.Info.Expiration), "refreshIn", delay)
	}
	v.armRefreshLocked(h, c, delay)
	return now.Add(delay)
}

// armRefreshLocked (re)sets c's refresh timer to fire after d. The
// callback takes no lock of the vault: a fake clock calls it under its own.
func (v *Vault) armRefreshLocked(h *handler, c *Credential, d time.Duration) {
	if c.refresh != nil {
		c.refresh.Stop()
	}
	c.refresh = v.clock.AfterFunc(d, func() {
		v.spawn(func() { v.refresh(h, c) })
	})
}

// Refresh asks every handler for a new credential now, in the background,
// as when a credential nears its expiry: the credentials held keep serving
// until their replacements arrive, and a handler that fails keeps its
// credential and is retried with backoff. Use it when you know the
// credentials are about to change (the Secret a handler reads was
// rewritten, the old token will be revoked): no request waits for the new
// one, and none meets the old one's 401. A handler backing off after a
// failed login runs at once: what it reads may have been fixed. A handler
// whose login is under way is left to it, and a handler is still never
// called twice within its login floor (its initial backoff): the refresh
// then comes at the floor. A vault that has never logged in stays as it is:
// its first login, when it is first used, reads what is current then.
// Refresh never waits.
func (v *Vault) Refresh() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || !v.loggedInLocked() {
		return
	}
	empty := true
	for _, h := range v.activeLocked() {
		h.retryAt = time.Time{}
		if h.cred != nil {
			empty = false
			if !h.running {
				v.startLocked(h, login.Reason{Kind: login.Refresh})
			}
		}
	}
	// Handlers without a credential log in as a round when none serves
	// (the first-login rules pick the winner), else one by one.
	if empty {
		v.startDueLocked()
		return
	}
	for _, h := range v.activeLocked() {
		if h.cred == nil && !h.running {
			v.startLocked(h, h.lossReason())
		}
	}
}

// loggedInLocked tells whether any handler has been called or is being
// called: whether the vault has been used.
func (v *Vault) loggedInLocked() bool {
	for _, h := range v.activeLocked() {
		if h.running || !h.lastCall.IsZero() {
			return true
		}
	}
	return false
}

// refresh logs h in again while its credential c still serves.
func (v *Vault) refresh(h *handler, c *Credential) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || h.cred != c || h.running {
		return
	}
	v.startLocked(h, login.Reason{Kind: login.Refresh})
}
