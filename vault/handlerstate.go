package vault

import (
	"crypto/sha256"
	"errors"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// handlerState is a registered login.Handler and everything the vault knows
// of it. Every change to that state is a method below: each takes the time
// it happens at and says what follows from it, and none holds a lock, reads
// a clock, starts a goroutine or sees the Vault. The vault-wide rules (which
// handlers log in, the first-login round, publishing) are the core's, in
// core.go; the vault runs the calls (login.go) and applies the results
// (Vault.applyLocked).
type handlerState struct {
	fn       login.Handler // what the vault calls; no method here does
	settings handlerconf.Settings
	// fallback tells that it came from Options.Fallback: its credentials
	// rank below a registered handler's.
	fallback bool

	cred    *Credential  // its current credential, or nil
	running bool         // a login is under way
	reason  login.Reason // why that login runs
	outcome error        // the last login's error; nil after success
	backoff wait.Backoff // delays between failed logins, stepped without jitter
	// retryAt: no new login before it, unless Refresh says so.
	retryAt time.Time
	// refreshAt is when cred is logged in again while it serves: the
	// sooner of renewAt and the recheck the handler asked for; zero when
	// neither applies.
	refreshAt time.Time
	// renewAt is when cred's expiry calls for a new one (see schedule);
	// zero when it does not expire.
	renewAt time.Time
	// recheck is the ConnectionInfo.RefreshAfter of the credential h last
	// gave, taken or unchanged: h is asked again that long after.
	recheck     time.Duration
	invalidated []refused // its recently invalidated credentials, oldest first
	// strikes counts its credentials in a row that the server rejected
	// before they served a request; one that serves resets it.
	strikes int
	// lastCall is when its last call started: the next login starts no
	// earlier than settings.BackoffInitial after it (the login floor).
	lastCall time.Time
	// calls numbers its calls; returnedCalls is the number of the last
	// one that has returned, which may be long after an attempt abandoned it.
	// A handler is never called while a call of it runs.
	calls, returnedCalls uint64
	// abandoned tells that an attempt gave up on its last call at its
	// timeout (authvault_abandoned_calls shows it until the call returns).
	abandoned bool
	// lastRank is the rank of its last credential: while lower ones
	// serve, it logs in again at retryAt (see core.retryAbove).
	lastRank rank
	// loss is why it last lost its credential; zero while it never had
	// one. Its next login tells the handler (login.ReasonFrom).
	loss login.Reason
	// firstPending tells that it is in a login round on an empty vault and
	// has not finished its first attempt: the round's credentials are held
	// back until it has (see core.startDue).
	firstPending bool
	// returned is closed when its last call returns: the vault's login
	// loop waits on it, no method of the state touches it.
	returned chan struct{}
}

// Backoff of failed logins: factor 2 with up to a fifth more at random,
// bounded by the handler's BackoffMax.
const (
	backoffFactor = 2
	backoffJitter = 0.2
)

func newHandlerState(fn login.Handler, s handlerconf.Settings, fallback bool) *handlerState {
	h := &handlerState{fn: fn, settings: s, fallback: fallback}
	h.backoff = newBackoff(s)
	// Until it gives a credential, a registered handler ranks as one of
	// priority 0 would, above every fallback (see core.retryAbove).
	h.lastRank = rank{registered: !fallback}
	return h
}

// newBackoff is the backoff of a handler that has not failed. Its steps
// carry no jitter: step adds it, from the core's random source, so that a
// model run is repeatable.
func newBackoff(s handlerconf.Settings) wait.Backoff {
	return wait.Backoff{
		Duration: s.BackoffInitial,
		Factor:   backoffFactor,
		Steps:    64, // bounded by Cap long before these run out
		Cap:      s.BackoffMax,
	}
}

// step advances b and returns its next delay with jitter.
func step(b *wait.Backoff, jitter func(int64) int64) time.Duration {
	d := b.Step()
	return d + time.Duration(jitter(int64(float64(d)*backoffJitter)+1))
}

// maxBackoff is the longest delay the handler's backoff can give.
func (h *handlerState) maxBackoff() time.Duration {
	top := max(h.settings.BackoffMax, h.settings.BackoffInitial)
	return top + time.Duration(float64(top)*backoffJitter) + 1
}

// lossReason is why h logs in when it has no credential.
func (h *handlerState) lossReason() login.Reason {
	if h.loss.Kind == "" {
		return login.Reason{Kind: login.FirstLogin}
	}
	return h.loss
}

// idle tells whether h can start a login at now: it has none under way and
// is not backing off.
func (h *handlerState) idle(now time.Time) bool {
	return !h.running && !h.retryAt.After(now)
}

// start begins a login for reason.
func (h *handlerState) start(reason login.Reason) {
	h.running, h.reason = true, reason
}

// startRound starts a login of h as one of a round on an empty vault, at
// now, unless h has a credential, a login under way or a backoff to wait
// for; it tells whether it did.
func (h *handlerState) startRound(now time.Time) bool {
	if h.cred != nil || !h.idle(now) {
		return false
	}
	h.start(h.lossReason())
	h.firstPending = true
	return true
}

// untilFloor is how long a login that starts at now waits for the login
// floor.
func (h *handlerState) untilFloor(now time.Time) time.Duration {
	if h.lastCall.IsZero() {
		return 0
	}
	return h.lastCall.Add(h.settings.BackoffInitial).Sub(now)
}

// callable tells whether h may be called: its last call has returned.
func (h *handlerState) callable() bool { return h.returnedCalls == h.calls }

// called notes a call of h starting at now; it returns the call's number.
func (h *handlerState) called(now time.Time) uint64 {
	h.calls++
	h.lastCall, h.abandoned = now, false
	return h.calls
}

// callReturned notes that call n of h has returned.
func (h *handlerState) callReturned(n uint64) {
	h.returnedCalls = max(h.returnedCalls, n)
}

// abandonedCall tells whether an attempt gave up on a call that still runs.
func (h *handlerState) abandonedCall() bool { return h.abandoned && !h.callable() }

// nextDelay is how long to wait after a failed attempt at now: what a
// Temporary error asks for, else the handler's next backoff step, but
// during a failed refresh no more than half the time its credential has
// left (and no less than the login floor): the retries grow denser as the
// expiry nears, so that an issuer outage that ends before the credential
// does is caught before callers find the vault empty, however far the
// backoff has grown. A capped retry leaves the backoff where it was.
func (h *handlerState) nextDelay(now time.Time, err error, jitter func(int64) int64) time.Duration {
	var temporary *login.TemporaryError
	if errors.As(err, &temporary) && temporary.Delay > 0 {
		return temporary.Delay
	}
	next := h.backoff // a copy: a capped retry leaves h.backoff as it was
	d := step(&next, jitter)
	if c := h.cred; c != nil && !c.usableUntil.IsZero() {
		if left := c.usableUntil.Sub(now); left > 0 && max(h.settings.BackoffInitial, left/2) < d {
			// A retry the expiry brings forward does not grow the
			// backoff: past the expiry, the retries go on from the step
			// the uncapped ones reached, not from BackoffMax.
			return max(h.settings.BackoffInitial, left/2)
		}
	}
	h.backoff = next
	return d
}

// offered checks c, just returned by h at now, against what the vault
// refuses: the error says why it is refused. It sets c.usableUntil, which
// the checks need.
func (h *handlerState) offered(now time.Time, c *Credential, leeway time.Duration) error {
	if i := slices.IndexFunc(h.invalidated, func(v refused) bool { return v.digest == c.digest }); i >= 0 {
		if r := h.invalidated[i].rejection; r != nil {
			return &reofferedError{rejection: r}
		}
		return errInvalidated
	}
	if exp := c.Info.Expiration; !exp.IsZero() {
		life := exp.Sub(now)
		if life <= 0 {
			return errExpired
		}
		c.usableUntil = exp.Add(-min(leeway, life/4))
	}
	if old := h.cred; old != nil && old.digest == c.digest && old.Info.Expiration.Equal(c.Info.Expiration) {
		return errUnchanged
	}
	return nil
}

// install makes c, offered and not refused, h's credential at now, ending
// its login; it returns the credential c replaces, if any, and whether c
// expires so soon that its refresh backs off instead (see schedule).
func (h *handlerState) install(now time.Time, c *Credential, jitter func(int64) int64) (old *Credential, unsound bool) {
	old = h.drop()
	h.cred, h.lastRank = c, c.rank()
	h.running, h.outcome, h.retryAt = false, nil, time.Time{}
	return old, h.schedule(now, jitter)
}

// schedule sets when h's credential, just installed at now, is refreshed,
// and resets h's backoff when the credential is sound and h has no strikes
// or TLS failure against it (those are cleared by a credential that
// serves, see served). It tells whether the credential is unsound.
//
// Refresh window: a credential that expires is refreshed when a tenth of
// its usable lifetime is left, at least refreshWindowMin but never more
// than half of it, moved earlier by a random part of up to half the window
// so that replicas of an operator do not log in together. A refresh that
// would come sooner than the login floor comes at the floor, when the
// credential still serves then. One that would not outlive the floor
// arrived inside its own refresh window (it lives a few milliseconds, or a
// source hands out the same short remainder again): refreshing it soon
// would only repeat that, so its refresh waits for the handler's next
// backoff step instead, and the backoff keeps growing until a sound
// credential comes.
//
// A handler's recheck (ConnectionInfo.RefreshAfter) brings the refresh
// forward when it comes sooner, never sooner than the login floor.
func (h *handlerState) schedule(now time.Time, jitter func(int64) int64) (unsound bool) {
	c := h.cred
	h.renewAt = time.Time{}
	var delay time.Duration
	if !c.usableUntil.IsZero() {
		life := c.usableUntil.Sub(now)
		window := min(max(life/refreshWindowPart, refreshWindowMin), life/2)
		delay = life - window - time.Duration(jitter(int64(window/2)+1))
		switch {
		case life <= h.settings.BackoffInitial:
			unsound = true
			delay = max(delay, step(&h.backoff, jitter))
		case delay < h.settings.BackoffInitial:
			delay = h.settings.BackoffInitial // the login floor; it still serves then
		}
		h.renewAt = now.Add(delay)
	}
	h.recheck = c.Info.RefreshAfter
	h.refreshAt = earlier(h.renewAt, h.recheckAt(now))
	if !unsound {
		h.resetBackoff()
	}
	return unsound
}

// resetBackoff starts h's backoff anew, unless h has strikes or a TLS
// failure against it: those are cleared by a credential that serves (see
// served).
func (h *handlerState) resetBackoff() {
	if h.strikes == 0 && h.loss.Kind != login.TLSFailure {
		h.backoff = newBackoff(h.settings)
	}
}

// recheckAt is when h is asked again for the recheck it asked for, counted
// from now: no sooner than the login floor; zero when it asked for none.
func (h *handlerState) recheckAt(now time.Time) time.Time {
	if h.recheck <= 0 {
		return time.Time{}
	}
	return now.Add(max(h.recheck, h.settings.BackoffInitial))
}

// earlier is the earlier of a and b, where zero means never (unlike
// later, where zero is the earliest).
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// unchanged ends h's login at now, which gave again the credential h holds
// (err is errUnchanged): it serves on, and nothing failed. A refresh that
// its expiry called for comes again after the handler's next backoff step,
// within half the time the credential has left (see nextDelay): its source
// has not rotated yet. Otherwise the backoff starts anew, and h is asked
// again when its recheck (set from the credential it gave) says.
func (h *handlerState) unchanged(now time.Time, err error, jitter func(int64) int64) {
	h.running, h.outcome, h.retryAt = false, err, time.Time{}
	if !h.renewAt.IsZero() && !h.renewAt.After(now) {
		h.retryAt = now.Add(h.nextDelay(now, err, jitter))
		h.renewAt = h.retryAt
	} else {
		h.resetBackoff()
	}
	h.refreshAt = earlier(h.renewAt, h.recheckAt(now))
}

// finish ends h's login at now with err, no credential taken, and the next
// no earlier than delay from now; closed tells that the vault is closing.
// It tells whether this login gave nothing, as the one before it did.
func (h *handlerState) finish(now time.Time, err error, delay time.Duration, closed bool) (again bool) {
	again = errors.Is(h.outcome, errNoCredential) && errors.Is(err, errNoCredential)
	h.running, h.outcome = false, err
	h.retryAt = now.Add(delay)
	if h.cred != nil && !h.refreshAt.IsZero() && !closed {
		// A failed refresh (before expiry, or a recheck): try again after
		// the backoff while the old credential keeps serving.
		h.refreshAt = h.retryAt
	}
	return again
}

// refreshDue tells whether h's credential is to be refreshed at now.
func (h *handlerState) refreshDue(now time.Time) bool {
	return h.cred != nil && !h.running && !h.refreshAt.IsZero() && !h.refreshAt.After(now)
}

// refreshReason is why h's refresh due at now runs: its credential's
// expiry draws near (Refresh), or only the recheck it asked for has come
// (Reread): a token file read again every minute expires never.
func (h *handlerState) refreshReason(now time.Time) login.Reason {
	if !h.renewAt.IsZero() && !h.renewAt.After(now) {
		return login.Reason{Kind: login.Refresh}
	}
	return login.Reason{Kind: login.Reread}
}

// served notes that h's credential got an answer other than 401 for the
// first time. When h had strikes or a TLS failure against it, they and
// their backoff are cleared: h gives credentials that work, so the next
// rejection is an ordinary revocation.
func (h *handlerState) served() {
	if h.strikes == 0 && h.loss.Kind != login.TLSFailure {
		return
	}
	h.strikes, h.loss = 0, login.Reason{}
	h.backoff = newBackoff(h.settings)
	if errors.Is(h.outcome, errRejectedAtOnce) {
		h.outcome, h.retryAt = nil, time.Time{}
	}
}

// drop removes h's credential and its refresh; it returns it, or nil.
func (h *handlerState) drop() *Credential {
	c := h.cred
	h.cred, h.refreshAt, h.renewAt = nil, time.Time{}, time.Time{}
	return c
}

// expired drops h's credential if it is no longer usable at now.
func (h *handlerState) expired(now time.Time) *Credential {
	if h.cred == nil || h.cred.usable(now) {
		return nil
	}
	h.loss = login.Reason{Kind: login.Expired}
	return h.drop()
}

// tlsFailed notes that TLS with h's credential's server failed
// verification at now. The token is not at fault but the CA: the handler
// may give it again with the new CA. Its next login waits for its backoff,
// so that a CA that has not rotated yet costs a login per backoff, not one
// per request.
func (h *handlerState) tlsFailed(now time.Time, cause error, jitter func(int64) int64) {
	h.drop()
	h.loss = login.Reason{Kind: login.TLSFailure}
	h.outcome = cause
	h.retryAt = now.Add(step(&h.backoff, jitter))
}

// refused is a credential the vault refuses from its handler again:
// its digest, and the server's 401 that invalidated it (nil for another
// cause), which the error of offering it again carries, since the 401's
// challenge may say what to do.
type refused struct {
	digest    [sha256.Size]byte
	rejection error
}

// rejected notes that h's credential c was invalidated at now for cause,
// loss saying why; the vault refuses its digest while it is among h's last keep ones. When
// strike says the server rejected it (a 401) and it never served, it counts
// against h: the second strike in a row makes h back off, so that an
// authenticator outage or a handler minting bad credentials gives callers
// a LoginError at once rather than costing a login per request (one is let
// go: a token can have been revoked before its first use). It tells
// whether h backs off.
func (h *handlerState) rejected(now time.Time, c *Credential, loss login.Reason, cause error, keep int, strike bool, jitter func(int64) int64) (backsOff bool) {
	h.drop()
	h.loss = loss
	v := refused{digest: c.digest}
	if strike {
		v.rejection = cause
	}
	h.invalidated = append(h.invalidated, v)
	if extra := len(h.invalidated) - keep; extra > 0 {
		h.invalidated = slices.Delete(h.invalidated, 0, extra)
	}
	if !strike || c.served.Load() {
		return false
	}
	h.strikes++
	if h.strikes < 2 || h.running {
		return false
	}
	h.outcome = errRejectedAtOnce
	h.retryAt = now.Add(step(&h.backoff, jitter))
	return true
}
