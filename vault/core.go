package vault

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/authvault/authvault/login"
)

// core is the vault's state machine: the handlers' states and the rules
// between them (which handlers log in, the first-login round, a higher
// priority logging in again while a lower one serves). Each event is a
// method that takes the time it happens at and returns the effects the
// vault must apply; like a handlerState, the core holds no lock, reads no
// clock, starts no goroutine and never sees the Vault, so that tests drive
// it directly (see the model test). The vault calls it under Vault.mu.
type core struct {
	opts   Options             // withDefaults applied
	jitter func(n int64) int64 // a random duration in [0, n); tests make it fixed

	handlers     []*handlerState      // registered with OnLogin, in order
	fallback     []*handlerState      // from Options.Fallback, made when first needed
	madeFallback bool                 // fallbackHandlers has made them
	registered   []login.Registration // what OnLogin was given, for SetDefault
	closed       bool                 // no new login, no new credential
	lastLoss     lastRejection        // the last credential invalidated since one was accepted, for LoginError
	// settling holds the credentials of a login on an empty vault back
	// until every handler of the round has finished its first attempt, or
	// settleAt (Options.FirstLoginWait after the round began) has passed.
	settling bool
	settleAt time.Time
	// roundStart is when the vault, holding no usable credential, last
	// started logins (for Ready); zero once a credential arrives.
	roundStart time.Time
}

// effects are what the vault must do after an event.
type effects struct {
	start   []*handlerState // logins to begin, each for its handler's reason
	dropped []*Credential   // credentials gone: their connections may go
	// superseded are credentials replaced by their handler's next one:
	// their TLS identity may skip its grace (see pool.superseded).
	superseded []supersession
	accepted   *Credential // a new credential: the transport routes under its server
	publish    bool        // the credentials changed: publish a snapshot and wake waiters
	wake       bool        // waiters should look again
	// renewed tells that accepted authenticates as the credential it
	// replaces (the same token with a new expiration): nothing changed
	// for the server.
	renewed bool
	// early names the handlers the round stopped waiting for when
	// FirstLoginWait passed.
	early []string
	// expired are the credentials dropped because they expired.
	expired []*Credential

	// Set by seal at the end of every event, so that the vault applies
	// the effects without asking the core again.
	creds    []*Credential // what to publish, when publish
	held     bool          // the round holds them back
	deadline time.Time     // when tick is next due; zero: never
}

// seal completes e at the end of an event.
func (c *core) seal(e effects) effects {
	if e.publish {
		e.creds, e.held = c.creds(), c.settling
	}
	e.deadline = c.deadline()
	return e
}

type supersession struct{ old, new *Credential }

func newCore(opts Options, jitter func(int64) int64) *core {
	return &core{opts: opts, jitter: jitter}
}

// register adds a handler registered with OnLogin at now. It logs in at
// once when it ranks above what serves (see retryAbove): no later event may
// come to start it while a fallback's credential that never expires
// serves.
func (c *core) register(now time.Time, fn login.Handler, opts []login.Option) (e effects) {
	if c.closed {
		return c.seal(e)
	}
	h := c.newHandler(fn, opts, false)
	c.handlers = append(c.handlers, h)
	c.registered = append(c.registered, login.Registration{Handler: fn, Options: opts})
	c.retryAbove(now, h, &e)
	return c.seal(e)
}

// newHandler configures a handler with a unique ID and a unique metric
// label: a second one of the same is numbered ("token file#2").
func (c *core) newHandler(fn login.Handler, opts []login.Option, fallback bool) *handlerState {
	s := configure(fn, opts...)
	s.ID = c.unique(s.ID, func(h *handlerState) string { return h.settings.ID })
	s.Label = c.unique(s.Label, func(h *handlerState) string { return h.settings.Label })
	return newHandlerState(fn, s, fallback)
}

// unique is name, numbered if a handler has it already as of.
func (c *core) unique(name string, of func(*handlerState) string) string {
	taken := func(n string) bool {
		return slices.ContainsFunc(c.all(), func(h *handlerState) bool { return of(h) == n })
	}
	unique := name
	for n := 2; taken(unique); n++ {
		unique = name + "#" + strconv.Itoa(n)
	}
	return unique
}

// lookup finds a handler by ID.
func (c *core) lookup(id string) *handlerState {
	for _, h := range c.all() {
		if h.settings.ID == id {
			return h
		}
	}
	return nil
}

// active are the handlers a login runs.
func (c *core) active() []*handlerState {
	switch {
	case len(c.handlers) == 0:
		return c.fallbackHandlers()
	case c.opts.KeepFallback:
		return append(c.handlers[:len(c.handlers):len(c.handlers)], c.fallbackHandlers()...)
	}
	return c.handlers
}

// all are the handlers that may hold credentials.
func (c *core) all() []*handlerState {
	return append(c.handlers[:len(c.handlers):len(c.handlers)], c.fallback...)
}

// fallbackHandlers makes the fallback handlers the first time they are
// needed, so that a vault whose own handlers serve shows none of them.
func (c *core) fallbackHandlers() []*handlerState {
	if !c.madeFallback {
		c.madeFallback = true
		for _, r := range c.opts.Fallback {
			c.fallback = append(c.fallback, c.newHandler(r.Handler, r.Options, true))
		}
	}
	return c.fallback
}

// creds are the credentials the handlers hold.
func (c *core) creds() []*Credential {
	var creds []*Credential
	for _, h := range c.all() {
		if h.cred != nil {
			creds = append(creds, h.cred)
		}
	}
	return creds
}

// topRank is the rank of the best credential held, and false if none is.
func (c *core) topRank() (rank, bool) {
	var top rank
	found := false
	for _, cred := range c.creds() {
		if r := cred.rank(); !found || compareRanks(r, top) > 0 {
			top, found = r, true
		}
	}
	return top, found
}

// begin starts a login of h for reason.
func (c *core) begin(h *handlerState, reason login.Reason, e *effects) {
	h.start(reason)
	e.start = append(e.start, h)
}

// changed notes that the credentials changed: the vault publishes them,
// and, unless the round holds them back, a handler that ranks above what
// serves now logs in again (after its backoff): a registered handler that
// gave nothing while a fallback serves, under KeepFallback, is asked again.
func (c *core) changed(now time.Time, e *effects) {
	e.publish = true
	if !c.settling {
		for _, h := range c.active() {
			c.retryAbove(now, h, e)
		}
	}
}

// retryAbove makes sure that h, which has no credential, logs in again
// while credentials of a lower priority than its last one serve: otherwise
// only an empty vault would start its login, and the lower priority
// (another cluster, with the fallback defaults) would serve for good. It
// starts the login when h's retryAt has come; until then deadline gives it.
func (c *core) retryAbove(now time.Time, h *handlerState, e *effects) {
	if c.wantsRetryAbove(h) && h.idle(now) {
		c.begin(h, h.lossReason(), e)
	}
}

// wantsRetryAbove tells whether h waits to log in above what serves.
func (c *core) wantsRetryAbove(h *handlerState) bool {
	if c.closed || h.cred != nil || h.running {
		return false
	}
	// What serves first: on a vault not used yet, active would make the
	// fallback handlers.
	top, ok := c.topRank()
	return ok && compareRanks(h.lastRank, top) > 0 && slices.Contains(c.active(), h)
}

// startDue starts a login for each active handler that has no credential
// and is neither logging in nor backing off, at now, on a vault without a
// usable credential: the handlers started make a round whose credentials
// are held back until each has finished its first attempt, or
// FirstLoginWait has passed, so that callers get the highest priority the
// round gives rather than the fastest handler's.
func (c *core) startDue(now time.Time, e *effects) {
	if c.closed {
		return
	}
	started := false
	for _, h := range c.active() {
		if h.startRound(now) {
			e.start = append(e.start, h)
			started = true
		}
	}
	if started && c.roundStart.IsZero() {
		c.roundStart = now
	}
	if started && !c.settling && c.opts.FirstLoginWait > 0 && len(c.active()) > 1 {
		c.settling, c.settleAt = true, now.Add(c.opts.FirstLoginWait)
	}
}

// wanted is a caller's request for a credential at now that found none to
// hand out (Select's slow path): what expired goes, and when nothing else
// can serve, the handlers that can log in do, as a round, unless a round's
// logins are under way. serve tells that the caller finds a credential now;
// else wait, that it waits for a login, or err, why it cannot.
func (c *core) wanted(now time.Time) (e effects, serve, wait bool, err *LoginError) {
	if c.closed {
		return e, false, false, nil
	}
	c.expired(now, &e)
	if !c.settling && c.usable(now) {
		return c.seal(e), true, false, nil
	}
	if !c.settling {
		c.startDue(now, &e)
	}
	if !c.loggingIn() {
		return c.seal(e), false, false, c.loginError(now, nil)
	}
	return c.seal(e), false, true, nil
}

// ready is the readiness at now (see Vault.Ready): nil while a credential
// is usable, held back or not, or while the vault logs in and has been
// without one for less than Options.ReadyGrace. Like a caller (see
// wanted), it starts the logins that are due.
func (c *core) ready(now time.Time) (effects, error) {
	var e effects
	c.expired(now, &e)
	if c.usable(now) {
		return c.seal(e), nil
	}
	if !c.settling {
		c.startDue(now, &e)
	}
	if !c.loggingIn() {
		return c.seal(e), c.loginError(now, nil)
	}
	if c.roundStart.IsZero() {
		// A login that began as a refresh, whose credential has gone
		// since: the grace counts from now.
		c.roundStart = now
	}
	if waited := now.Sub(c.roundStart); waited >= c.opts.ReadyGrace {
		return c.seal(e), c.loginError(now, fmt.Errorf("vault: without a usable credential, logging in, for %s", waited.Round(time.Millisecond)))
	}
	return c.seal(e), nil
}

// firstAttemptDone notes that h has finished its first attempt of the
// round; the last one releases the round's credentials.
func (c *core) firstAttemptDone(now time.Time, h *handlerState, e *effects) {
	if !h.firstPending {
		return
	}
	h.firstPending = false
	if c.settling && len(c.pending()) == 0 {
		c.endSettling(now, e)
	}
}

// pending names the handlers whose first attempt of the round is still
// under way.
func (c *core) pending() []string {
	var ids []string
	for _, h := range c.all() {
		if h.firstPending {
			ids = append(ids, h.settings.ID)
		}
	}
	return ids
}

// endSettling hands the round's credentials out.
func (c *core) endSettling(now time.Time, e *effects) {
	if !c.settling {
		return
	}
	c.settling, c.settleAt = false, time.Time{}
	for _, h := range c.all() {
		h.firstPending = false
	}
	if !c.closed {
		c.changed(now, e)
	}
}

// loggingIn tells whether any handler is logging in, or a round's first
// attempts are still being waited for.
func (c *core) loggingIn() bool {
	return c.settling || slices.ContainsFunc(c.all(), func(h *handlerState) bool { return h.running })
}

// used tells whether any handler has been called or is being called:
// whether the vault has been used.
func (c *core) used() bool {
	return slices.ContainsFunc(c.active(), func(h *handlerState) bool { return h.running || !h.lastCall.IsZero() })
}

// usable tells whether any handler holds a usable credential at now, held
// back for the first-login wait or not.
func (c *core) usable(now time.Time) bool {
	return slices.ContainsFunc(c.all(), func(h *handlerState) bool { return h.cred != nil && h.cred.usable(now) })
}

// returnedCredential ends an attempt of h at now that gave cred, unless the vault
// refuses cred: err then says why, and the attempt goes on to
// attemptFailed. Else cred is h's credential, and unsound tells that its
// refresh backs off (see handlerState.schedule).
func (c *core) returnedCredential(now time.Time, h *handlerState, cred *Credential) (e effects, unsound bool, err error) {
	if c.closed {
		return e, false, ErrClosed
	}
	if err := h.offered(now, cred, c.opts.Leeway); err != nil {
		if errors.Is(err, errUnchanged) {
			// The credential h has serves on, rechecked as h now asks
			// (see attemptFailed).
			h.recheck = cred.Info.RefreshAfter
		}
		return e, false, err
	}
	old, unsound := h.install(now, cred, c.jitter)
	if old != nil {
		e.dropped = append(e.dropped, old)
		e.superseded = append(e.superseded, supersession{old, cred})
		e.renewed = old.digest == cred.digest
	}
	e.accepted = cred
	c.roundStart = time.Time{}
	// A rejection before this credential no longer says why the vault may
	// run empty: a LoginError names one only if no credential came since.
	c.lastLoss = lastRejection{}
	// With the credential: once the vault's lock is let go, the
	// credential may be gone and h in the next round, whose first attempt
	// a late mark would end.
	c.firstAttemptDone(now, h, &e)
	c.changed(now, &e)
	return c.seal(e), unsound, nil
}

// attemptFailed ends attempt n of h's login at now with err (a failure,
// or why returnedCredential refused the credential). It says whether the
// login goes on, and after how long; else it has finished, and again tells
// that it gave nothing as the one before it did. A login that gave the
// credential h holds has not failed: it ends, and h is asked again as
// handlerState.unchanged says.
func (c *core) attemptFailed(now time.Time, h *handlerState, n int, err error) (e effects, retry bool, delay time.Duration, again bool) {
	if n == 1 {
		c.firstAttemptDone(now, h, &e)
	}
	if errors.Is(err, errUnchanged) && h.cred != nil && !c.closed {
		h.unchanged(now, err, c.jitter)
		e.wake = true
		return c.seal(e), false, 0, false
	}
	if c.closed {
		again = c.finish(now, h, err, 0, &e)
		return c.seal(e), false, 0, again
	}
	delay = h.nextDelay(now, err, c.jitter)
	if !retryable(err) || (h.settings.Retries != login.Unlimited && n > h.settings.Retries) {
		again = c.finish(now, h, err, delay, &e)
		return c.seal(e), false, delay, again
	}
	h.outcome = err
	return c.seal(e), true, delay, false
}

// stopped ends h's login at now before its next call: the vault closed, or
// (err is errStillRunning's) h's abandoned call did not return in time.
func (c *core) stopped(now time.Time, h *handlerState, err error) (e effects, again bool) {
	delay := time.Duration(0)
	if !c.closed {
		delay = h.nextDelay(now, err, c.jitter)
	}
	again = c.finish(now, h, err, delay, &e)
	return c.seal(e), again
}

// finish ends h's login at now with err and no credential; the next comes
// no earlier than delay from now. It tells whether the login gave nothing,
// as the one before it did.
func (c *core) finish(now time.Time, h *handlerState, err error, delay time.Duration, e *effects) (again bool) {
	c.firstAttemptDone(now, h, e) // a login that ended before its first attempt
	again = h.finish(now, err, delay, c.closed)
	c.retryAbove(now, h, e) // a higher priority that failed: not only on an empty vault
	e.wake = true
	return again
}

// served notes at now that h's credential got an answer other than 401
// for the first time (see handlerState.served): a handler that was backing
// off may log in again now.
func (c *core) served(now time.Time, h *handlerState) (e effects) {
	h.served()
	c.retryAbove(now, h, &e)
	return c.seal(e)
}

// invalidated removes cred at now because of cause, unless it is no
// longer its handler's (replaced since, or invalidated already); loss is
// why its handler logs in next, unless TLS failed. ok tells whether it
// did, backsOff whether its handler now backs off (see
// handlerState.rejected).
func (c *core) invalidated(now time.Time, cred *Credential, cause error, by invalidation, loss login.Reason) (e effects, ok, backsOff bool) {
	h := cred.owner
	if c.closed || h == nil || h.cred != cred {
		return e, false, false
	}
	c.lastLoss = lastRejection{server: cred.Info.Server, cause: cause}
	if by == byTLSFailure {
		h.tlsFailed(now, cause, c.jitter)
	} else {
		backsOff = h.rejected(now, cred, loss, cause, c.opts.InvalidatedRefused, by == by401, c.jitter)
	}
	e.dropped = append(e.dropped, cred)
	c.changed(now, &e)
	c.retryAbove(now, h, &e)
	return c.seal(e), true, backsOff
}

// expired drops the credentials no longer usable at now.
func (c *core) expired(now time.Time, e *effects) {
	var lastUsable time.Time // when the last of them stopped being usable
	dropped := false
	for _, h := range c.all() {
		if cred := h.expired(now); cred != nil {
			lastUsable = later(lastUsable, cred.usableUntil)
			e.dropped = append(e.dropped, cred)
			e.expired = append(e.expired, cred)
			dropped = true
		}
	}
	if !dropped {
		return
	}
	if c.roundStart.IsZero() && !c.usable(now) {
		// The vault has had nothing to serve since then, whatever logins
		// (a failing refresh) are under way: Ready counts from it.
		c.roundStart = lastUsable
	}
	c.changed(now, e)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// refreshAll asks every handler for a new credential at now (see
// Vault.Refresh).
func (c *core) refreshAll(now time.Time) (e effects) {
	if c.closed || !c.used() {
		return c.seal(e)
	}
	for _, h := range c.active() {
		h.retryAt = time.Time{}
		if h.cred != nil && !h.running {
			c.begin(h, login.Reason{Kind: login.Refresh}, &e)
		}
	}
	// Handlers without a credential log in as a round when the vault holds
	// none (the first-login rules pick the winner), else one by one: a
	// round would hold back what serves, a fallback's credential beside
	// handlers registered since, until its slowest handler is done.
	if len(c.creds()) == 0 {
		c.startDue(now, &e)
		return c.seal(e)
	}
	for _, h := range c.active() {
		if h.cred == nil && !h.running {
			c.begin(h, h.lossReason(), &e)
		}
	}
	return c.seal(e)
}

// deadline is the next time at which tick has something to do; zero if
// none.
func (c *core) deadline() time.Time {
	var next time.Time
	sooner := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if c.closed {
		return next
	}
	if c.settling {
		sooner(c.settleAt)
	}
	for _, h := range c.all() {
		switch {
		case h.cred != nil && !h.running:
			sooner(h.refreshAt)
		case c.wantsRetryAbove(h):
			sooner(later(h.retryAt, time.Unix(0, 1))) // retryAt may be zero: due at once
		}
	}
	return next
}

// tick does at now what is due by then: the end of the round's wait,
// refreshes before expiry, logins above what serves.
func (c *core) tick(now time.Time) (e effects) {
	if c.closed {
		return c.seal(e)
	}
	if c.settling && !c.settleAt.After(now) {
		e.early = c.pending()
		c.endSettling(now, &e)
	}
	for _, h := range c.all() {
		if h.refreshDue(now) {
			c.begin(h, h.refreshReason(now), &e)
		}
		c.retryAbove(now, h, &e)
	}
	return c.seal(e)
}

// close ends every credential: no new login, no new credential.
func (c *core) close(now time.Time) (e effects) {
	c.closed = true
	c.endSettling(now, &e)
	for _, h := range c.all() {
		if cred := h.drop(); cred != nil {
			e.dropped = append(e.dropped, cred)
		}
	}
	e.publish = true
	return c.seal(e)
}

// loginError describes why there is no credential at now.
func (c *core) loginError(now time.Time, callerErr error) *LoginError {
	e := &LoginError{Server: c.lastLoss.server, Cause: c.lastLoss.cause, Err: callerErr}
	active := c.active()
	if len(active) == 0 && callerErr == nil {
		e.Err = ErrNoHandlers
	}
	for _, h := range active {
		e.Handlers = append(e.Handlers, Outcome{
			Handler: h.settings.ID,
			Err:     h.outcome,
			Running: h.running,
			Held:    c.settling && h.cred != nil,
			RetryAt: retryAt(h, now),
		})
	}
	return e
}
