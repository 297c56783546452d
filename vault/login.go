package vault

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/internal/absent"
	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/internal/whence"
	"github.com/authvault/authvault/login"
)

// Refresh window: see handlerState.schedule.
const (
	refreshWindowMin  = 30 * time.Second
	refreshWindowPart = 10
)

// loginRun is one login of a handler, run in a goroutine of its own: the
// calls, their waits and their logs. What each result means is the core's.
type loginRun struct {
	v *Vault
	h *handlerState
}

// run runs h's attempts for reason until one gives a credential the
// vault accepts, the handler's retries run out, or the vault closes: the
// calls, their waits and their logs. What each result means is the core's
// (core.returnedCredential, core.attemptFailed). It starts no earlier than the
// handler's initial backoff after its previous call (the login floor), so
// that credentials that live a few milliseconds cannot make a handler run
// in a loop.
//
// Its log lines carry the handler and the reason; an attempt's, its number
// too, and the handler gets that logger in its context.
func (l *loginRun) run(reason login.Reason) {
	v, h := l.v, l.h
	log := v.log.WithValues("handler", h.settings.ID, "reason", reason.String())
	v.mu.Lock()
	floor := h.untilFloor(v.clock.Now())
	quiet := reason.Kind == login.Refresh || reason.Kind == login.Reread || errors.Is(h.outcome, errNoCredential) || v.core.offstage(h)
	v.mu.Unlock()
	if quiet {
		// A routine refresh (its end is at INFO), a handler asked again
		// after it gave nothing (INFO said so once, and says when it gives
		// one), or a fallback whose login serves nobody (core.offstage).
		log.V(1).Info("logging in")
	} else {
		log.Info("logging in")
	}
	ctx := login.WithReason(v.life.ctx, reason)
	if !l.sleep(floor) {
		l.stop(log, ErrClosed)
		return
	}
	for n := 1; ; n++ {
		log := log.WithValues("attempt", n)
		if err := l.awaitReturn(log); err != nil {
			l.stop(log, err)
			return
		}
		start := time.Now()
		cred, err := l.call(logr.NewContext(ctx, belowBodies(log)))
		// The attempt's metric and log lines come before its effects are
		// applied: whoever the credential or the failure wakes sees them.
		v.mu.Lock()
		var e effects
		if err == nil {
			var unsound bool
			offstage := v.core.offstage(h) // before cred is h's
			if e, unsound, err = v.core.returnedCredential(v.clock.Now(), h, cred); err == nil {
				v.metrics.attempt(h.settings.Label, result(nil), time.Since(start))
				if offstage {
					log = log.V(1)
				}
				l.loggedIn(cred, unsound, e.renewed, log)
				v.emptyHanded = false
				v.applyLocked(e)
				v.mu.Unlock()
				return
			}
			v.pool.releaseRoute(cred.route)
		}
		v.metrics.attempt(h.settings.Label, result(err), time.Since(start))
		e, retry, delay, again := v.core.attemptFailed(v.clock.Now(), h, n, err)
		if !retry {
			l.endLocked(err, again).log(log)
			v.logEmptyHandedLocked()
		}
		outranked := v.core.outranked(h)
		v.applyLocked(e)
		v.mu.Unlock()
		if !retry {
			return
		}
		if outranked {
			log = log.V(1)
		}
		logFailure(log, err, "login attempt failed", "retryIn", delay)
		if !l.sleep(delay) {
			l.stop(log, err)
			return
		}
	}
}

// awaitReturn makes sure that h's last call has returned before h is called
// again: a call that an attempt abandoned at its timeout may still run, and
// a handler must never run concurrently with itself. It waits for that call
// at most one more timeout; if the call is still running then, the login
// ends with errStillRunning, so that waiting callers get a LoginError
// rather than wait on a handler that may never return. It returns ErrClosed
// if the vault closes first.
func (l *loginRun) awaitReturn(log logr.Logger) error {
	v, h := l.v, l.h
	v.mu.Lock()
	returned := h.returned
	v.mu.Unlock()
	if returned == nil || isDone(returned) {
		return nil
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

// call runs the handler once, with ctx, and makes what it returns a
// credential.
func (l *loginRun) call(ctx context.Context) (*Credential, error) {
	v, h := l.v, l.h
	returned := make(chan struct{})
	v.mu.Lock()
	n := h.called(v.clock.Now())
	h.returned = returned
	v.mu.Unlock()
	ctx, note := whence.WithNote(ctx)
	info, err := callHandler(ctx, h.settings, func(ctx context.Context) (*login.ConnectionInfo, error) {
		entered := v.life.enter()
		defer func() {
			// Noted before the call leaves the calls Close waits for,
			// and also when Close refused it.
			v.mu.Lock()
			h.callReturned(n)
			v.mu.Unlock()
			close(returned)
			if entered {
				v.life.calls.Done()
			}
		}()
		if !entered {
			return nil, ErrClosed
		}
		return h.fn(ctx)
	})
	if err != nil {
		if what, ok := absent.What(err); ok {
			// A built-in handler's "nothing from me", saying what it
			// looked for.
			return nil, &noCredentialError{what: what}
		}
		if errors.Is(err, login.ErrAbandoned) {
			v.mu.Lock()
			h.abandoned = true
			v.mu.Unlock()
		}
		return nil, err
	}
	if info == nil {
		return nil, errNoCredential
	}
	r, err := newRoute(info, v.pool)
	if err != nil {
		return nil, err
	}
	return &Credential{Handler: h.settings.ID, Info: info, owner: h, digest: handlerconf.Digest(info),
		fingerprint: info.Fingerprint(), route: r, whence: note.Where()}, nil
}

// loggedIn logs the handler's new credential c; v.mu is held, before c is
// published. One that renewed the credential it replaces (the same token
// with a new expiration) is at V(1), as an unchanged one is.
func (l *loginRun) loggedIn(c *Credential, unsound, renewed bool, log logr.Logger) {
	v, h := l.v, l.h
	if unsound {
		v.log.V(1).Info("credential expires within its refresh window: its refresh backs off", "handler", h.settings.ID,
			"fingerprint", c.fingerprint, "expiration", expirationValue(c.Info.Expiration),
			"refreshIn", h.refreshAt.Sub(v.clock.Now()))
	}
	kv := withTime([]any{"fingerprint", c.fingerprint, "server", c.Info.Server,
		"priority", c.Info.Priority, "expiration", expirationValue(c.Info.Expiration)}, "refreshAt", h.refreshAt)
	if renewed {
		log.V(1).Info("logged in: the credential is unchanged", kv...)
		return
	}
	log.Info("logged in", kv...)
}

// stop ends the login before its next call (see core.stopped).
func (l *loginRun) stop(log logr.Logger, err error) {
	v := l.v
	v.mu.Lock()
	e, again := v.core.stopped(v.clock.Now(), l.h, err)
	l.endLocked(err, again).log(log) // before the callers it wakes look
	v.logEmptyHandedLocked()
	v.applyLocked(e)
	v.mu.Unlock()
}

// loginEnd is how a login that gave no credential ended, as its last event
// left the handler: what its log line says.
type loginEnd struct {
	err                error
	again, closed      bool
	offstage           bool // a fallback's routine line at V(1) (core.offstage)
	fallback           bool // a fallback's "gave nothing" is at V(1) too
	outranked          bool // a fallback's failure at V(1) too (core.outranked)
	retryAt, refreshAt time.Time
	serving            []any // what serves meanwhile: the handler's credential, if a refresh failed
}

// endLocked is the end of the login with err, read in the lock of the
// event that ended it and logged in it: a Refresh or Close a moment later
// does not change what its line says, and whoever sees the state the
// login left sees its line too.
func (l *loginRun) endLocked(err error, again bool) loginEnd {
	h := l.h
	end := loginEnd{err: err, again: again, closed: l.v.core.closed, offstage: l.v.core.offstage(h), outranked: l.v.core.outranked(h), fallback: h.fallback,
		retryAt: h.retryAt, refreshAt: h.refreshAt}
	if c := h.cred; c != nil {
		end.serving = []any{"fingerprint", c.fingerprint, "servesUntil", expirationValue(c.usableUntil)}
	}
	return end
}

// log logs the end of a login that gave no credential.
func (end loginEnd) log(log logr.Logger) {
	kv, err := end.serving, end.err
	quiet := end.offstage && !failed(err) || end.outranked
	// At V(1) once at most: logr's V levels add up, and a line made quiet
	// twice would not show at V(1).
	at := func(quiet bool) logr.Logger {
		if quiet {
			return log.V(1)
		}
		return log
	}
	var none *noCredentialError
	switch {
	case end.closed:
	case errors.Is(err, errNoCredential):
		// Once at INFO: a handler that gives nothing for good (its store
		// is not set up, and a fallback serves) is asked every BackoffMax.
		// A fallback that gives nothing is at V(1): most of them do (no
		// in-cluster service account beside a kubeconfig), and when all
		// of them do, logEmptyHandedLocked says so.
		if errors.As(err, &none) {
			kv = append(kv, "missing", none.what)
		}
		at(quiet || end.again || end.fallback).Info("login gave no credential", append(kv, "retryAt", end.retryAt.Round(0))...)
	case errors.Is(err, errUnchanged):
		// A Secret rewritten with the same token, a token file touched:
		// nothing failed, and the credential serves on.
		at(true).Info("logged in: the credential is unchanged", withTime(kv, "refreshAt", end.refreshAt)...)
	default:
		logFailure(at(quiet), err, "login failed", append(kv, "retryAt", end.retryAt.Round(0))...)
	}
}

// failed tells whether a login that ended with err failed, rather than
// ending with nothing or with the credential the vault has.
func failed(err error) bool {
	return !errors.Is(err, errNoCredential) && !errors.Is(err, errUnchanged)
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

// sleep waits d on the vault's clock; false if the vault closed first.
func (l *loginRun) sleep(d time.Duration) bool {
	v := l.v
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
	v.applyLocked(v.core.refreshAll(v.clock.Now()))
}
