package vault

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/authvault/authvault/internal/clockctx"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
)

// Options configure a Vault. The zero value is valid: every field has a
// default, given in its comment.
type Options struct {
	// Logger receives the vault's events, never a secret: at INFO, once
	// each, every login and why, its end, and whose credentials are handed
	// out and until when; at V(1), what happens per request (a credential
	// invalidated, one found expired, a caller refused). A failed login is
	// one line with "error" and "action" (what to do): at INFO when its
	// cause is outside the process, so that zap adds no stack trace, at
	// error level for a handler's bug (a panic). The vault adds no name of
	// its own: pass one, as in ctrl.Log.WithName("authvault"). A handler
	// finds this logger in its context (logr.FromContext), with the keys
	// "handler", "reason" and "attempt". Default: the zero logr.Logger,
	// which discards.
	Logger logr.Logger

	// Leeway is how long before its expiration a credential stops being
	// handed out, for clock skew with the server. For a credential that
	// lives less than four times the leeway, a quarter of its lifetime is
	// used instead, so short-lived tokens stay usable. Default: 10 s;
	// negative: none.
	Leeway time.Duration

	// Fallback handlers log in when no handler is registered with OnLogin
	// (or beside them, with KeepFallback). Default: piggyback.Defaults():
	// the kubeconfig named by --kubeconfig or $KUBECONFIG, the in-cluster
	// ServiceAccount, ~/.kube/config, in that order of priority (30, 20,
	// 10). They are made when first needed: without KeepFallback, a vault
	// whose handlers are registered before its first login has no fallback
	// handler in its logs, metrics or LoginErrors.
	Fallback []login.Registration

	// NoFallback turns the fallback off: a vault without handlers then
	// returns a LoginError wrapping ErrNoHandlers.
	NoFallback bool

	// KeepFallback keeps the fallback beside the handlers registered with
	// OnLogin: "my login, else whatever this process already has". The
	// fallback handlers then log in with the registered ones, and their
	// credentials serve only while no registered handler has one, whatever
	// the Priority of each. Their log lines are at V(1), as without
	// handlers of yours, unless a fallback's credential serves in place of
	// yours: INFO then says which, and its refreshes; a fallback's failure
	// is at INFO while none of yours has a credential. Default: false, the fallback stops once a handler is
	// registered.
	KeepFallback bool

	// InvalidatedRefused is how many of each handler's latest invalidated
	// credentials the vault refuses if the handler returns them again.
	// Default: 5; negative: none.
	InvalidatedRefused int

	// TransportGrace is how long the connections of a credential without a
	// token or password (a client certificate, say) are kept once no
	// credential uses them, for the next credential with the same TLS
	// identity; then they are closed as soon as they are idle. A
	// credential replaced by its handler's next one of another TLS identity
	// (a reissued certificate) skips the grace: that handler will not bring
	// it back. A token's
	// connections are closed once idle as soon as its credential is gone:
	// no later token uses them. Default: 1 min; negative: none.
	TransportGrace time.Duration

	// FirstLoginWait bounds how long a login on an empty vault holds its
	// credentials back for handlers that have not finished their first
	// attempt: callers are released once every handler of the round has
	// finished its first attempt (each bounded by its timeout), and get the
	// highest priority present, so that a fast, low-priority handler (the
	// in-cluster ServiceAccount) does not serve while a slower, higher one
	// (a kubeconfig's exec plugin) is about to give its credential; a
	// handler that hangs holds them no longer than this, counted from the
	// start of the round. It applies to every login on an empty vault (the
	// first, and a re-login after the last credential went), and only when
	// more than one handler is registered. A caller whose deadline comes
	// first gets a LoginError that says which credential is held back.
	// Default: 10 s; negative: no wait, the first credential is handed out
	// at once.
	FirstLoginWait time.Duration

	// MaxWait is the longest a caller waits for a credential: a Select
	// (and so a request through Transport, or RESTConfig) that finds the
	// vault without one and a login under way waits for it no longer than
	// this, even when its context has no deadline, as a reconcile's or an
	// informer's list often has not; then it gets a LoginError wrapping
	// ErrMaxWait that names every handler's last outcome, and the login
	// goes on in the background, for the next caller. A handler that
	// fails and retries without end (login.Retries(login.Unlimited), the
	// default) would otherwise hold such callers for as long as it fails.
	// A request through Transport waits at most this long for each of its
	// at most two logins (the first, and one after a 401). Default: 1 min;
	// negative: no bound but the caller's context.
	MaxWait time.Duration

	// ReadyGrace is how long a login on a vault without a usable
	// credential counts as ready (see Vault.Ready): long enough for a slow
	// first login, short enough that a pod whose logins hang is taken out
	// of service. Default: 1 min; negative: none, not ready until a
	// credential arrives.
	ReadyGrace time.Duration

	// Registerer receives the vault's Prometheus metrics (authvault_*),
	// each with the label cluster: empty, unless Registerer adds it (a
	// fleet's vaults, or prometheus.WrapRegistererWith(prometheus.Labels{
	// "cluster": "hub"}, reg)), so that a fleet's vaults and this one share
	// a registry. A second vault on one registerer needs a cluster of its
	// own, or its metrics are not registered (logged). Close unregisters
	// them. Default: nil, which registers nothing.
	Registerer prometheus.Registerer
}

const (
	defaultLeeway             = 10 * time.Second
	defaultInvalidatedRefused = 5
	// defaultFirstLoginWait: see Options.FirstLoginWait.
	defaultFirstLoginWait = 10 * time.Second
	// defaultReadyGrace: see Options.ReadyGrace.
	defaultReadyGrace = time.Minute
	// defaultMaxWait: see Options.MaxWait.
	defaultMaxWait = time.Minute
)

// defaulted is the rule of every number in Options: zero means the
// default, a negative value means none.
func defaulted[T int | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

func (o Options) withDefaults() Options {
	o.Leeway = defaulted(o.Leeway, defaultLeeway)
	o.InvalidatedRefused = defaulted(o.InvalidatedRefused, defaultInvalidatedRefused)
	o.ReadyGrace = defaulted(o.ReadyGrace, defaultReadyGrace)
	o.FirstLoginWait = defaulted(o.FirstLoginWait, defaultFirstLoginWait)
	o.MaxWait = defaulted(o.MaxWait, defaultMaxWait)
	o.TransportGrace = defaulted(o.TransportGrace, defaultGrace)
	switch {
	case o.NoFallback:
		o.Fallback = nil
	case o.Fallback == nil:
		o.Fallback = piggyback.Defaults()
	}
	return o
}

// Vault holds the credentials that login handlers return and hands them out.
// All its methods are safe for concurrent use. A Vault starts no goroutine
// until it is first used; Close stops all of them.
type Vault struct {
	// Its state and rules are the core's (core.go, handlerstate.go); the
	// Vault runs what the core asks for (logins, a timer, publishing what
	// Select hands out) and applies it under mu.

	// Set by New and never changed.
	opts    Options
	log     logr.Logger
	clock   clock.WithDelayedExecution
	metrics *metrics
	pool    *pool // the transports of the credentials' identities; locks itself

	// Read by every request without a lock; written under mu, copied on
	// write.
	snap  atomic.Pointer[snapshot] // what Select hands out
	bases atomic.Pointer[[]base]   // servers the transport routes under, longest prefix first

	// Lock order: mu, then pool.mu. life.spawnMu comes last: spawn takes
	// it under mu (a login starting) or a fake clock's lock (a timer's
	// callback), and nothing is taken under it. A method whose
	// name ends in Locked is called with mu held.
	mu      sync.Mutex
	core    *core         // the handlers and the rules between them
	changed chan struct{} // closed and replaced when a waiter should look again
	timers  timers        // the core's next deadline, and the snapshot's expiry
	// emptyHanded is set once the vault has said that every handler gave
	// nothing (logEmptyHandedLocked), until a credential arrives.
	emptyHanded bool
	serving     []string // the handlers last logged as handed out (see logServingLocked)

	waits waitCounts // callers blocked on a login; atomic
	drain drain      // requests counted while Shutdown waits
	life  lifecycle  // the goroutines and handler calls Close waits for

	// Close is recorded where each lock needs it: core.closed under mu
	// (no new login, no new credential), life.stopping under
	// life.spawnMu (no new goroutine or handler call), pool.closed under
	// pool.mu (no new transport), and life.ctx canceled (logins under
	// way end).
}

// lastRejection is the server and cause of the last credential invalidated.
type lastRejection struct {
	server string
	cause  error
}

// timers are the vault's timers, guarded by Vault.mu: tick runs core.tick
// at the core's deadline (tickAt), and expiry marks the current snapshot
// stale at its soonest expiry.
type timers struct {
	tick   clock.Timer
	tickAt time.Time
	expiry clock.Timer
}

// waitCounts count the callers blocked on a login now (waiting) and all
// that ever were (waited). Only the slow path of Select touches them.
type waitCounts struct{ waiting, waited atomic.Int64 }

// lifecycle is what Close stops and waits for. ctx ends every login when the
// vault closes; spawnMu guards stopping, and wg.Add and calls.Add against
// Close, so that nothing starts once Close waits.
type lifecycle struct {
	ctx       context.Context
	cancel    context.CancelFunc
	spawnMu   sync.Mutex
	stopping  bool
	wg        sync.WaitGroup // every goroutine the vault started
	calls     sync.WaitGroup // handler calls under way
	closeOnce sync.Once
}

// New returns a vault. It logs in only when a credential is first needed.
func New(opts Options) *Vault {
	return newVault(opts, clock.RealClock{})
}

func newVault(opts Options, clk clock.WithDelayedExecution) *Vault {
	opts = opts.withDefaults()
	// Logins run under ctx, which carries the clock to the handlers.
	ctx, cancel := context.WithCancel(clockctx.With(context.Background(), clk))
	v := &Vault{
		opts:    opts,
		log:     opts.Logger, // as given: the caller names it
		clock:   clk,
		core:    newCore(opts, rand.Int64N),
		changed: make(chan struct{}),
		life:    lifecycle{ctx: ctx, cancel: cancel},
	}
	v.snap.Store(&snapshot{})
	v.bases.Store(&[]base{})
	v.pool = newPool(v.spawn)
	v.pool.grace = opts.TransportGrace
	v.metrics = newMetrics(v)
	if err := v.metrics.register(opts.Registerer); err != nil {
		v.log.Error(err, "registering metrics")
	}
	return v
}

// Default is the vault that the package-level OnLogin registers with, for
// handlers registered where the vault is not at hand (a package's init, as
// Kopf's decorators do). It has the zero Options: no logger and no metrics
// until SetDefault gives it some.
var Default = New(Options{})

// OnLogin registers h with the Default vault.
func OnLogin(h login.Handler, opts ...login.Option) { Default.OnLogin(h, opts...) }

// SetDefault replaces Default with a vault of the given options (a logger,
// a registerer), registered with the handlers registered with Default so
// far, and closes the old one. Call it at the start of main, before
// anything uses Default or the goroutines of a program can: it is not safe
// for concurrent use with the package-level OnLogin or with reads of
// Default.
func SetDefault(opts Options) *Vault {
	old := Default
	old.mu.Lock()
	registered := slices.Clone(old.core.registered)
	old.mu.Unlock()
	// Before New: the old vault's metrics leave the registerer (a second
	// SetDefault may give the same one) before the new one's come.
	old.Close()
	v := New(opts)
	for _, r := range registered {
		v.OnLogin(r.Handler, r.Options...)
	}
	Default = v
	return v
}

// OnLogin registers a login handler. Handlers take part in the next login;
// once one is registered, the fallback handlers are no longer run, unless
// Options.KeepFallback says so. A handler registered while only fallback
// credentials serve logs in at once, and its credential serves in their
// place. A handler whose ID is taken gets a numbered one ("id#2"); so does
// one whose metric label is (see login.Named: "token file#2").
//
// The vault hands out a credential of the highest ConnectionInfo.Priority
// present (0 unless the handler sets it), and lower ones only while no
// higher one is left. The fallback handlers give 30, 20 and 10; under
// KeepFallback they rank below every registered handler's credential
// whatever its Priority, so a handler of priority 0 still wins over them.
func (v *Vault) OnLogin(h login.Handler, opts ...login.Option) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.applyLocked(v.core.register(v.clock.Now(), h, opts))
}

// closeGrace is how long Close waits for handler calls to return after
// their context ended: a handler that ignores its context is abandoned then.
const closeGrace = 5 * time.Second

// applyLocked does what the core's effects ask for: releases the
// connections of credentials gone, routes under a new credential's server,
// publishes, starts logins, and arms the timer for the core's next
// deadline.
func (v *Vault) applyLocked(e effects) {
	for {
		if e.accepted != nil {
			v.addBaseLocked(e.accepted.route.base)
		}
		if len(e.early) > 0 {
			v.log.Info("handing out credentials before every handler finished its first attempt: the wait is bounded",
				"firstLoginWait", v.opts.FirstLoginWait, "waitingFor", e.early)
		}
		for _, c := range e.expired {
			v.log.V(1).Info("credential expired", "handler", c.Handler, "fingerprint", c.fingerprint,
				"expiration", expirationValue(c.Info.Expiration))
		}
		for _, h := range e.start {
			reason := h.reason
			if !v.spawn(func() { (&loginRun{v: v, h: h}).run(reason) }) {
				h.running = false // the vault is closing
			}
		}
		now := v.clock.Now()
		due := !e.deadline.IsZero() && !e.deadline.After(now)
		if !due {
			v.armTickLocked(e.deadline, now)
		}
		for _, c := range e.dropped {
			v.pool.releaseRoute(c.route)
		}
		for _, s := range e.superseded {
			// A handler whose new credential has another TLS identity (a
			// reissued client certificate) will not bring the old one
			// back: it skips the grace kept for a re-login with the
			// same identity.
			v.pool.superseded(s.old.route, s.new.route)
		}
		switch {
		case e.publish:
			v.publishLocked(e.creds, e.held)
		case e.wake:
			v.broadcastLocked()
		}
		if !due {
			return
		}
		// A deadline that has passed is done now: a fake clock would not
		// fire a timer armed for it until its next step.
		e = v.core.tick(now)
	}
}

// armTickLocked sets the tick timer for at, unless it is set for it
// already; zero stops it. The callback takes no lock: a fake clock calls it
// under its own.
func (v *Vault) armTickLocked(at, now time.Time) {
	t := &v.timers
	if at.Equal(t.tickAt) && (t.tick != nil) == !at.IsZero() {
		return
	}
	if t.tick != nil {
		t.tick.Stop()
		t.tick = nil
	}
	t.tickAt = at
	if at.IsZero() {
		return
	}
	var timer clock.Timer
	timer = v.clock.AfterFunc(at.Sub(now), func() {
		v.spawn(func() {
			v.mu.Lock()
			defer v.mu.Unlock()
			// Fired: the next deadline arms anew. Unless an event re-armed
			// the timer while this callback waited for mu: that timer is
			// the one to keep (and to stop at Close).
			if v.timers.tick == timer {
				v.timers.tickAt, v.timers.tick = time.Time{}, nil
			}
			v.applyLocked(v.core.tick(v.clock.Now()))
		})
	})
	t.tick = timer
}

// spawn runs f in a goroutine that Close waits for, unless the vault is
// closing. It takes no lock but spawnMu, so that timer callbacks can call it.
func (v *Vault) spawn(f func()) bool {
	v.life.spawnMu.Lock()
	defer v.life.spawnMu.Unlock()
	if v.life.stopping {
		return false
	}
	v.life.wg.Add(1)
	go func() {
		defer v.life.wg.Done()
		f()
	}()
	return true
}

// Close stops every login and refresh, wakes waiting callers with ErrClosed,
// and waits for the vault's goroutines and handler calls to end. A handler
// that ignores its context is waited for five seconds, then abandoned. Close
// is safe to call more than once.
func (v *Vault) Close() {
	v.life.closeOnce.Do(func() {
		v.mu.Lock()
		v.applyLocked(v.core.close(v.clock.Now()))
		v.mu.Unlock()

		v.life.spawnMu.Lock()
		v.life.stopping = true
		v.life.spawnMu.Unlock()
		v.life.cancel()
		v.life.wg.Wait()
		v.waitForCalls()
		v.pool.close()
		v.metrics.unregister(v.opts.Registerer)
		v.log.V(1).Info("vault closed")
	})
}

// waitForCalls waits for handler calls to return, up to closeGrace.
func (v *Vault) waitForCalls() {
	returned := make(chan struct{})
	go func() { // ends when the last call returns, even after the grace
		v.life.calls.Wait()
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(closeGrace):
		v.log.Info("closed without waiting for login handlers that ignore their context")
	}
}

// addBaseLocked makes the transport route requests under r's server.
func (v *Vault) addBaseLocked(b base) {
	old := *v.bases.Load()
	if slices.Contains(old, b) {
		return
	}
	bases := append(slices.Clone(old), b)
	slices.SortStableFunc(bases, func(x, y base) int { return len(y.prefix) - len(x.prefix) })
	v.bases.Store(&bases)
}
