package vault

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/authvault/authvault/internal/clockctx"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
)

// Options configure a Vault. The zero value is valid: every field has a
// default, given in its comment.
type Options struct {
	// Logger receives the vault's events (logins, new credentials,
	// invalidations) at V(1) and failures at error level, never a secret.
	// Default: the zero logr.Logger, which discards.
	Logger logr.Logger

	// Leeway is how long before its expiration a credential stops being
	// handed out, for clock skew with the server. For a credential that
	// lives less than four times the leeway, a quarter of its lifetime is
	// used instead, so short-lived tokens stay usable. Default: 10 s.
	Leeway time.Duration

	// Fallback handlers log in when no handler is registered with OnLogin.
	// Default: piggyback.Defaults(): the kubeconfig named by --kubeconfig
	// or $KUBECONFIG, the in-cluster ServiceAccount, ~/.kube/config, in
	// that order of priority.
	Fallback []login.Registration

	// NoFallback turns the fallback off: a vault without handlers then
	// returns a LoginError wrapping ErrNoHandlers.
	NoFallback bool

	// Remembered is how many invalidated credentials of each handler the
	// vault remembers, to refuse a handler that returns one of them again.
	// Default: 5.
	Remembered int

	// TransportGrace is how long the connections of a credential without a
	// token or password (a client certificate, say) are kept once no
	// credential uses them, for the next credential with the same TLS
	// identity; then they are closed as soon as they are idle. A token's
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

	// ReadyGrace is how long a login on a vault without a usable
	// credential counts as ready (see Vault.Ready): long enough for a slow
	// first login, short enough that a pod whose logins hang is taken out
	// of service. Default: 1 min.
	ReadyGrace time.Duration

	// Registerer receives the vault's Prometheus metrics (authvault_*).
	// Default: nil, which registers nothing. Two vaults on one registerer
	// need prometheus.WrapRegistererWith to tell them apart.
	Registerer prometheus.Registerer
}

const (
	defaultLeeway     = 10 * time.Second
	defaultRemembered = 5
	// defaultFirstLoginWait: see Options.FirstLoginWait.
	defaultFirstLoginWait = 10 * time.Second
	// defaultReadyGrace: see Options.ReadyGrace.
	defaultReadyGrace = time.Minute
)

func (o Options) withDefaults() Options {
	if o.Leeway == 0 {
		o.Leeway = defaultLeeway
	}
	if o.Leeway < 0 {
		o.Leeway = 0
	}
	if o.Remembered <= 0 {
		o.Remembered = defaultRemembered
	}
	if o.ReadyGrace <= 0 {
		o.ReadyGrace = defaultReadyGrace
	}
	switch {
	case o.FirstLoginWait == 0:
		o.FirstLoginWait = defaultFirstLoginWait
	case o.FirstLoginWait < 0:
		o.FirstLoginWait = 0
	}
	switch {
	case o.TransportGrace == 0:
		o.TransportGrace = defaultGrace
	case o.TransportGrace < 0:
		o.TransportGrace = 0
	}
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
	opts  Options
	log   logr.Logger
	clock clock.WithDelayedExecution
	// jitter returns a random duration in [0, n); tests make it fixed.
	jitter func(n int64) int64

	// snap is what Select reads without a lock.
	snap atomic.Pointer[snapshot]

	// waiting counts the callers blocked on a login now; waited, all that
	// ever were. Only the slow path touches them.
	waiting, waited atomic.Int64

	// bases are the servers the transport routes requests under, longest
	// path prefix first; copied on write under mu.
	bases atomic.Pointer[[]base]

	pool    *pool // the transports of the credentials' TLS identities
	metrics *metrics

	mu         sync.Mutex    // guards the fields below and every handler's state
	handlers   []*handler    // registered with OnLogin, in order
	fallback   []*handler    // from Options.Fallback
	changed    chan struct{} // closed and replaced when a waiter should look again
	closed     bool
	winner     string      // the fallback handler last logged as in use
	expiry     clock.Timer // marks the current snapshot stale at its soonest
	lastServer string      // server of the last invalidated credential
	lastCause  error       // why it was invalidated
	// settling holds the credentials of a login on an empty vault back
	// until every handler of the round has finished its first attempt, or
	// settleTimer (Options.FirstLoginWait) fires: see startDue.
	settling    bool
	settleTimer clock.Timer
	// roundStart is when the vault, holding no usable credential, last
	// started logins (for Ready); zero once a credential arrives.
	roundStart time.Time

	// ctx ends every login when the vault closes.
	ctx    context.Context
	cancel context.CancelFunc

	spawnMu  sync.Mutex // guards stopping, and wg.Add and calls.Add against Close
	stopping bool
	wg       sync.WaitGroup // every goroutine the vault started
	calls    sync.WaitGroup // handler calls under way

	closeOnce sync.Once
}

// handler is a registered login handler and its login state.
type handler struct {
	fn       login.Handler
	settings login.Settings

	// Guarded by Vault.mu.
	cred      *Credential         // its current credential, or nil
	running   bool                // a login is under way
	outcome   error               // the last login's error; nil after success
	backoff   wait.Backoff        // delays between failed logins
	retryAt   time.Time           // no new login before this
	forgotten [][sha256.Size]byte // digests of its recently invalidated credentials
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
	// lastPriority is the priority of its last credential, and retryTimer
	// starts its next login at retryAt while lower priorities serve (see
	// Vault.retryAboveLocked).
	lastPriority int
	retryTimer   clock.Timer
	// loss is why it last lost its credential; zero while it never had
	// one. Its next login tells the handler (login.ReasonFrom).
	loss login.Reason
	// firstPending tells that it is in a login round on an empty vault and
	// has not finished its first attempt: the round's credentials are held
	// back until it has (see Vault.settling).
	firstPending bool
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
		log:     opts.Logger.WithName("authvault"),
		clock:   clk,
		jitter:  rand.Int64N,
		changed: make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
	v.snap.Store(emptySnapshot)
	v.bases.Store(&[]base{})
	v.pool = newPool(v.spawn)
	v.pool.grace = opts.TransportGrace
	v.metrics = newMetrics(v)
	if err := v.metrics.register(opts.Registerer); err != nil {
		v.log.Error(err, "registering metrics")
	}
	for _, r := range opts.Fallback {
		v.fallback = append(v.fallback, v.newHandler(r.Handler, r.Options))
	}
	return v
}

// Default is the vault that the package-level OnLogin registers with.
var Default = New(Options{})

// OnLogin registers h with the Default vault.
func OnLogin(h login.Handler, opts ...login.Option) { Default.OnLogin(h, opts...) }

// OnLogin registers a login handler. Handlers take part in the next login;
// once one is registered, the fallback handlers are no longer run. A handler
// whose ID is taken gets a numbered one ("id#2").
func (v *Vault) OnLogin(h login.Handler, opts ...login.Option) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	v.handlers = append(v.handlers, v.newHandler(h, opts))
}

// newHandler configures h with a unique ID; v.mu is held or v is new.
func (v *Vault) newHandler(h login.Handler, opts []login.Option) *handler {
	s := login.Configure(h, opts...)
	id := s.ID
	for n := 2; v.lookup(id) != nil; n++ {
		id = s.ID + "#" + strconv.Itoa(n)
	}
	s.ID = id
	return &handler{fn: v.tracked(h), settings: s, backoff: newBackoff(s)}
}

// closeGrace is how long Close waits for handler calls to return after
// their context ended: a handler that ignores its context is abandoned then.
const closeGrace = 5 * time.Second

// tracked wraps h so that Close can wait for its calls, which run in
// goroutines of their own (see login.Settings.Attempt).
func (v *Vault) tracked(h login.Handler) login.Handler {
	return func(ctx context.Context) (*login.ConnectionInfo, error) {
		v.spawnMu.Lock()
		if v.stopping {
			v.spawnMu.Unlock()
			return nil, ErrClosed
		}
		v.calls.Add(1)
		v.spawnMu.Unlock()
		defer v.calls.Done()
		return h(ctx)
	}
}

func newBackoff(s login.Settings) wait.Backoff {
	return wait.Backoff{
		Duration: s.BackoffInitial,
		Factor:   2,
		Jitter:   0.2,
		Steps:    64, // bounded by Cap long before these run out
		Cap:      s.BackoffMax,
	}
}

// lookup finds a handler by ID; v.mu is held.
func (v *Vault) lookup(id string) *handler {
	for _, list := range [][]*handler{v.handlers, v.fallback} {
		for _, h := range list {
			if h.settings.ID == id {
				return h
			}
		}
	}
	return nil
}

// active are the handlers a login runs; v.mu is held.
func (v *Vault) active() []*handler {
	if len(v.handlers) > 0 {
		return v.handlers
	}
	return v.fallback
}

// all are the handlers that may hold credentials; v.mu is held.
func (v *Vault) all() []*handler {
	return append(v.handlers[:len(v.handlers):len(v.handlers)], v.fallback...)
}

// publish rebuilds the snapshot from the handlers' credentials and wakes
// the waiters; v.mu is held.
func (v *Vault) publish() {
	var creds []*Credential
	for _, h := range v.all() {
		if h.cred != nil {
			creds = append(creds, h.cred)
		}
	}
	s := newSnapshot(creds)
	s.held = v.settling
	if v.expiry != nil {
		v.expiry.Stop()
		v.expiry = nil
	}
	if !s.soonest.IsZero() {
		// The callback takes no lock: a fake clock calls it under its own.
		if d := s.soonest.Sub(v.clock.Now()); d > 0 {
			v.expiry = v.clock.AfterFunc(d, func() { s.stale.Store(true) })
		} else {
			s.stale.Store(true)
		}
	}
	v.logFallbackWinner(s) // before a caller can see it
	v.snap.Store(s)
	v.broadcast()
}

// broadcast wakes every waiter; v.mu is held.
func (v *Vault) broadcast() {
	close(v.changed)
	v.changed = make(chan struct{})
}

// spawn runs f in a goroutine that Close waits for, unless the vault is
// closing. It takes no lock but spawnMu, so that timer callbacks can call it.
func (v *Vault) spawn(f func()) bool {
	v.spawnMu.Lock()
	defer v.spawnMu.Unlock()
	if v.stopping {
		return false
	}
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		f()
	}()
	return true
}

// Close stops every login and refresh, wakes waiting callers with ErrClosed,
// and waits for the vault's goroutines and handler calls to end. A handler
// that ignores its context is waited for five seconds, then abandoned. Close
// is safe to call more than once.
func (v *Vault) Close() {
	v.closeOnce.Do(func() {
		v.mu.Lock()
		v.closed = true
		v.endSettlingLocked()
		for _, h := range v.all() {
			v.drop(h)
			if h.retryTimer != nil {
				h.retryTimer.Stop()
			}
		}
		v.publish()
		v.mu.Unlock()

		v.spawnMu.Lock()
		v.stopping = true
		v.spawnMu.Unlock()
		v.cancel()
		v.wg.Wait()
		v.waitForCalls()
		v.pool.close()
		v.log.V(1).Info("vault closed")
	})
}

// waitForCalls waits for handler calls to return, up to closeGrace.
func (v *Vault) waitForCalls() {
	returned := make(chan struct{})
	go func() { // ends when the last call returns, even after the grace
		v.calls.Wait()
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(closeGrace):
		v.log.Info("closed without waiting for login handlers that ignore their context")
	}
}

// drop removes h's credential and stops its refresh; v.mu is held.
func (v *Vault) drop(h *handler) {
	if h.cred == nil {
		return
	}
	if h.cred.refresh != nil {
		h.cred.refresh.Stop()
	}
	h.cred.route.release(v.pool)
	h.cred = nil
}

// addBase makes the transport route requests under r's server; v.mu is held.
func (v *Vault) addBase(b base) {
	old := *v.bases.Load()
	if slices.Contains(old, b) {
		return
	}
	bases := append(slices.Clone(old), b)
	slices.SortStableFunc(bases, func(x, y base) int { return len(y.prefix) - len(x.prefix) })
	v.bases.Store(&bases)
}

// logFallbackWinner says, once for each change, which fallback handler's
// credentials the vault hands out; v.mu is held.
func (v *Vault) logFallbackWinner(s *snapshot) {
	if len(v.handlers) > 0 || len(s.groups) == 0 || v.closed || s.held {
		return
	}
	top := s.groups[0][0]
	if top.Key == v.winner {
		return
	}
	v.winner = top.Key
	v.log.Info("no login handler registered: using a fallback", "handler", top.Key, "server", top.Info.Server,
		"priority", top.Info.Priority, "why", "the highest-priority fallback that gave a credential")
}
