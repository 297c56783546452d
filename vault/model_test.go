package vault

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// The model test drives the vault's core as the vault does — logins that
// call their handlers, a timer at the core's deadline, callers, 401s, TLS
// failures, Refresh, Close — with random events and clock steps, and checks
// the core's rules after every step. It runs no goroutine and no timer: a
// failure names its seed and replays exactly.

// modelSequences is how many random sequences TestModel runs: a few
// seconds under -race; more hunt longer (go test -run TestModel
// -model.sequences 100000 ./vault).
var modelSequences = flag.Uint64("model.sequences", 2000, "random sequences TestModel runs")

func TestModel(t *testing.T) {
	for seed := range *modelSequences {
		m := newModel(seed, rand.New(rand.NewPCG(seed, 0x5eed)))
		if err := m.run(200); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, m.trace())
		}
	}
}

// FuzzModel runs the model on sequences the fuzzer chooses: each byte of
// the input picks the next event (see model.run).
func FuzzModel(f *testing.F) {
	f.Add(uint64(1), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add(uint64(7), []byte("select and fail, then refresh"))
	f.Fuzz(func(t *testing.T, seed uint64, events []byte) {
		m := newModel(seed, rand.New(&bytesSource{b: events, fallback: rand.NewPCG(seed, 1)}))
		if err := m.run(min(len(events), 400)); err != nil {
			t.Fatalf("%v\n%s", err, m.trace())
		}
	})
}

// bytesSource makes the fuzzer's bytes the model's choices, then a seeded
// generator's once they run out.
type bytesSource struct {
	b        []byte
	fallback rand.Source
}

func (s *bytesSource) Uint64() uint64 {
	if len(s.b) == 0 {
		return s.fallback.Uint64()
	}
	v := uint64(s.b[0]) * 0x9e3779b97f4a7c15
	s.b = s.b[1:]
	return v ^ s.fallback.Uint64()>>8
}

var modelEpoch = time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)

// model is the vault around a core: what its login loops, its timer and
// its snapshot would do, kept as data.
type model struct {
	core *core
	rnd  *rand.Rand
	now  time.Time
	log  []string

	logins map[*handlerState]*modelLogin // logins the core started and that have not ended
	calls  map[*handlerState]*modelCall  // calls in flight, abandoned ones too
	// lastCall is when each handler was last called.
	lastCall map[*handlerState]time.Time
	// rejected is each handler's last credential the server rejected: a
	// handler may give it again (a static token), which the vault refuses.
	rejected map[*handlerState]*login.ConnectionInfo
	// answered is, for each handler, its last login that gave a
	// credential, taken or unchanged, while no login of it has failed
	// since: the timer asks it again as that credential says.
	answered map[*handlerState]modelAnswer
	// issued are the credentials accepted so far: a late 401 may name one
	// that its handler has replaced since.
	issued   []*Credential
	snapshot []*Credential // as last published
	held     bool
	soonest  time.Time
	round    *modelRound   // an empty vault's login round, until it releases credentials
	lifetime time.Duration // of the credentials calls give once quiet; zero: they never expire
	tokens   int           // numbers the credentials handed out
	closed   bool
}

// modelLogin is one loginRun: next is when its next call may
// start (after the floor, or a retry's delay), n the attempt it is at.
type modelLogin struct {
	next       time.Time
	n          int
	waitReturn time.Time // set while it waits for an abandoned call: when it gives up
	firstDone  bool      // its first attempt has finished
}

type modelCall struct {
	n       uint64
	started time.Time
	attempt int
	dropped bool // abandoned at its timeout: its result is thrown away
}

type modelAnswer struct {
	at      time.Time
	recheck time.Duration // the credential's RefreshAfter
	cred    *Credential   // what the handler holds after it
}

type modelRound struct {
	began   time.Time
	pending map[*handlerState]bool
}

func newModel(seed uint64, rnd *rand.Rand) *model {
	opts := Options{
		Leeway:             pick(rnd, 0, 10*time.Second, time.Second),
		InvalidatedRefused: pick(rnd, 5, 1, 0),
		FirstLoginWait:     pick(rnd, 10*time.Second, 0, 2*time.Second),
		KeepFallback:       rnd.IntN(2) == 0,
		NoFallback:         rnd.IntN(3) == 0,
		Fallback:           []login.Registration{},
	}.withDefaults()
	if !opts.NoFallback {
		for i := range rnd.IntN(3) {
			opts.Fallback = append(opts.Fallback, login.Registration{Handler: nil,
				Options: modelSettings(rnd, fmt.Sprintf("fallback%d", i))})
		}
	}
	m := &model{
		core:     newCore(opts, func(n int64) int64 { return rnd.Int64N(n) }),
		rnd:      rnd,
		now:      modelEpoch,
		logins:   map[*handlerState]*modelLogin{},
		calls:    map[*handlerState]*modelCall{},
		lastCall: map[*handlerState]time.Time{},
		rejected: map[*handlerState]*login.ConnectionInfo{},
		answered: map[*handlerState]modelAnswer{},
	}
	m.logf("seed %d, %+v", seed, struct {
		Leeway, FirstLoginWait time.Duration
		Keep, None             bool
		Fallbacks              int
	}{opts.Leeway, opts.FirstLoginWait, opts.KeepFallback, opts.NoFallback, len(opts.Fallback)})
	// None at first, sometimes: the fallback serves, and handlers come
	// later (OnLogin below).
	for i := range rnd.IntN(4) {
		m.core.register(m.now, nil, modelSettings(rnd, fmt.Sprintf("h%d", i)))
	}
	return m
}

// modelSettings are a handler's options, from the fast ones of tests to
// the slow ones of production.
func modelSettings(rnd *rand.Rand, id string) []login.Option {
	initial := pick(rnd, time.Second, 100*time.Millisecond, 2*time.Second)
	return []login.Option{
		login.ID(id),
		login.Backoff(initial, pick(rnd, time.Minute, initial, 10*time.Second, initial/2)),
		login.Retries(pick(rnd, login.Unlimited, 0, 1, 3)),
		login.Timeout(pick(rnd, time.Duration(0), 20*time.Second, 500*time.Millisecond)),
	}
}

func pick[T any](rnd *rand.Rand, choices ...T) T { return choices[rnd.IntN(len(choices))] }

func (m *model) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("%8s ", m.now.Sub(modelEpoch).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func (m *model) trace() string {
	return strings.Join(m.log[max(0, len(m.log)-60):], "\n")
}

// run makes n random steps, checking after each, then lets the model go
// quiet and checks that it settles; one run in twenty then serves for half
// an hour with credentials that expire.
func (m *model) run(n int) error {
	for range n {
		if err := m.step(); err != nil {
			return err
		}
		if err := m.check(); err != nil {
			return err
		}
	}
	if err := m.settle(); err != nil {
		return err
	}
	if m.rnd.IntN(20) == 0 && !m.core.closed && len(m.core.active()) > 0 {
		return m.serve(pick(m.rnd, 40*time.Second, 5*time.Minute))
	}
	return nil
}

// step makes one random event.
func (m *model) step() error {
	switch m.rnd.IntN(13) {
	case 0, 1:
		return m.advance(pick(m.rnd, 10*time.Millisecond, 300*time.Millisecond, 2*time.Second, 30*time.Second, 10*time.Minute))
	case 2, 3:
		return m.selectCred()
	case 4, 5, 6:
		return m.callStep(false)
	case 7:
		if m.rnd.IntN(4) == 0 {
			return m.lateRejectStep()
		}
		return m.rejectStep(by401)
	case 8:
		if m.rnd.IntN(3) == 0 {
			return m.rejectStep(pick(m.rnd, byTLSFailure, byCaller))
		}
		return m.serveStep()
	case 9:
		m.logf("Refresh()")
		settling, held := m.core.settling, len(m.core.creds())
		e := m.core.refreshAll(m.now)
		if !settling && m.core.settling && held > 0 {
			// A round holds back every credential until its handlers
			// are done.
			return fmt.Errorf("a round began while the vault held %d credentials", held)
		}
		if held == 0 {
			m.roundOf(e) // logins as a round, when the vault holds none
		}
		return m.apply(e)
	case 10:
		return m.lateReturn()
	case 11:
		return m.ready()
	case 12:
		if m.rnd.IntN(40) == 0 {
			m.logf("Close()")
			m.closed = true
			return m.apply(m.core.close(m.now))
		}
		if m.rnd.IntN(8) == 0 && !m.core.closed {
			e := m.core.register(m.now, nil, modelSettings(m.rnd, fmt.Sprintf("late%d", len(m.core.handlers))))
			m.logf("OnLogin(%s)", m.core.handlers[len(m.core.handlers)-1].settings.ID)
			return m.apply(e)
		}
	}
	return nil
}

// apply does what the vault's applyLocked does with e, and checks what it
// asks for.
func (m *model) apply(e effects) (err error) {
	for range 10 {
		if err := m.applyOnce(e); err != nil {
			return err
		}
		if e.deadline.IsZero() || e.deadline.After(m.now) {
			return nil
		}
		if e, err = m.tick(); err != nil {
			return err
		}
	}
	return fmt.Errorf("the core's deadline stays at or before now (%s) after ten ticks", m.core.deadline().Sub(modelEpoch))
}

func (m *model) applyOnce(e effects) error {
	if !e.deadline.Equal(m.core.deadline()) {
		return fmt.Errorf("effects sealed with the deadline %s, the core's is %s", at(e.deadline), at(m.core.deadline()))
	}
	if e.publish {
		m.publish(e)
	}
	for _, h := range e.start {
		if m.closed {
			return fmt.Errorf("%s: a login started after Close", h.settings.ID)
		}
		if m.logins[h] != nil {
			return fmt.Errorf("%s: a second login started while one runs", h.settings.ID)
		}
		if !h.running {
			return fmt.Errorf("%s: a login started that the handler's state does not show running", h.settings.ID)
		}
		l := &modelLogin{next: m.now.Add(max(0, h.untilFloor(m.now)))}
		m.logins[h] = l
		m.logf("%s: login starts (%s), first call at %s", h.settings.ID, h.reason, l.next.Sub(modelEpoch))
	}
	return nil
}

// round notes the logins that e starts on a vault with nothing to hand out,
// when more than one handler may log in and FirstLoginWait is set: a round,
// whose credentials must wait for the first attempt of each.
func (m *model) roundOf(e effects) {
	if len(e.start) == 0 || m.core.opts.FirstLoginWait <= 0 || len(m.core.active()) < 2 ||
		slices.ContainsFunc(m.snapshot, func(c *Credential) bool { return c.usable(m.now) }) {
		return
	}
	if m.round == nil {
		m.round = &modelRound{began: m.now, pending: map[*handlerState]bool{}}
		m.logf("round begins")
	}
	for _, h := range e.start {
		m.round.pending[h] = true
	}
}

// publish is what the vault's publishLocked does: the credentials as the
// core sealed them, held back while its round settles.
func (m *model) publish(e effects) {
	if !slices.Equal(e.creds, m.core.creds()) || e.held != m.core.settling {
		panic("effects sealed with credentials other than the core's")
	}
	m.snapshot, m.held = e.creds, e.held
	m.soonest = time.Time{}
	for _, c := range m.snapshot {
		if !c.usableUntil.IsZero() && (m.soonest.IsZero() || c.usableUntil.Before(m.soonest)) {
			m.soonest = c.usableUntil
		}
	}
}

// handedOut is what Select would hand out now: the credentials of the
// highest rank, unless held back or stale.
func (m *model) handedOut() []*Credential {
	if m.held || len(m.snapshot) == 0 || (!m.soonest.IsZero() && !m.now.Before(m.soonest)) {
		return nil
	}
	s := newSnapshot(m.snapshot)
	return s.groups[0]
}

// advance moves the clock by d, firing the vault's timer at each deadline
// on the way, as a real clock would.
func (m *model) advance(d time.Duration) error {
	end := m.now.Add(d)
	m.logf("clock +%s", d)
	for {
		at := m.core.deadline()
		if at.IsZero() || at.After(end) {
			m.now = end
			return nil
		}
		m.now = later(m.now, at)
		e, err := m.tick()
		if err != nil {
			return err
		}
		if err := m.apply(e); err != nil {
			return err
		}
		if err := m.check(); err != nil {
			return err
		}
	}
}

// tick is the vault's timer firing at now. A refresh it starts for a
// credential that does not expire comes from the recheck its handler asked
// for (or a failed refresh's retry): not before that recheck is due.
func (m *model) tick() (effects, error) {
	e := m.core.tick(m.now)
	for _, h := range e.start {
		a, ok := m.answered[h]
		if h.reason.Kind == login.Reread && !h.cred.usableUntil.IsZero() && !m.now.Before(h.renewAt) {
			return e, fmt.Errorf("%s: %s refreshed for a reread once its expiry's refresh was due", h.settings.ID, h.cred.Info.Token)
		}
		if (h.reason.Kind != login.Refresh && h.reason.Kind != login.Reread) || !ok || a.cred != h.cred || !h.cred.usableUntil.IsZero() {
			continue
		}
		if a.recheck <= 0 {
			return e, fmt.Errorf("%s: refreshed %s, which neither expires nor asked for a recheck", h.settings.ID, h.cred.Info.Token)
		}
		if due := a.at.Add(max(a.recheck, h.settings.BackoffInitial)); m.now.Before(due) {
			return e, fmt.Errorf("%s: refreshed %s at %s, before the recheck it asked for at %s", h.settings.ID, h.cred.Info.Token, at(m.now), at(due))
		}
	}
	return e, nil
}

// answer notes that h's login gave a credential at now, taken or
// unchanged, asking for a recheck after recheck: it is asked again no
// later than that (nor its login floor), as long as its credential
// serves. An unchanged credential that does not expire is no failure: h's
// backoff starts anew.
func (m *model) answer(h *handlerState, recheck time.Duration, unchanged bool) error {
	m.answered[h] = modelAnswer{at: m.now, recheck: recheck, cred: h.cred}
	if h.cred == nil || h.running || m.core.closed {
		return nil
	}
	if recheck > 0 {
		due := m.now.Add(max(recheck, h.settings.BackoffInitial))
		if h.refreshAt.IsZero() || h.refreshAt.After(due) {
			return fmt.Errorf("%s: asked for a recheck at %s, and its refresh is at %s", h.settings.ID, at(due), at(h.refreshAt))
		}
	}
	if unchanged && h.cred.usableUntil.IsZero() && h.strikes == 0 && h.loss.Kind != login.TLSFailure && h.backoff != newBackoff(h.settings) {
		return fmt.Errorf("%s: gave its credential again, and its backoff is at %s", h.settings.ID, h.backoff.Duration)
	}
	return nil
}

// selectCred is Select's slow path when nothing is handed out.
func (m *model) selectCred() error {
	if m.core.closed || len(m.handedOut()) > 0 {
		return nil
	}
	m.logf("Select() finds nothing to hand out")
	e, serve, wait, err := m.core.wanted(m.now)
	m.roundOf(e)
	if err := m.apply(e); err != nil {
		return err
	}
	if err := m.checkExpired(); err != nil {
		return err
	}
	switch {
	case serve && len(m.handedOut()) == 0:
		return errors.New("Select was told to serve, and nothing is handed out")
	case !serve && len(m.handedOut()) > 0:
		return errors.New("Select was not told to serve, and a credential is handed out")
	case !serve && !wait && err == nil:
		return errors.New("Select neither serves, nor waits, nor fails")
	case wait && !m.core.loggingIn():
		return errors.New("Select waits, and no login runs")
	}
	return nil
}

func (m *model) ready() error {
	if m.core.closed {
		return nil
	}
	e, err := m.core.ready(m.now)
	m.logf("Ready() = %v", err != nil)
	m.roundOf(e)
	if err := m.apply(e); err != nil {
		return err
	}
	return m.checkExpired()
}

// checkExpired checks what Select's and Ready's slow paths leave: no
// credential the vault keeps is unusable.
func (m *model) checkExpired() error {
	for _, c := range m.core.creds() {
		if !c.usable(m.now) {
			return fmt.Errorf("%s: %s kept after its expiry (usable until %s)", c.Handler, c.Info.Token, at(c.usableUntil))
		}
	}
	return nil
}

// callStep advances a login that may call its handler now: it calls, or
// the call under way returns. quiet makes every call give a credential
// that never expires.
func (m *model) callStep(quiet bool) error {
	var ready []*handlerState
	for _, h := range m.core.all() {
		if c := m.calls[h]; c != nil && !c.dropped {
			ready = append(ready, h)
		} else if l := m.logins[h]; l != nil && !m.now.Before(l.next) {
			ready = append(ready, h)
		}
	}
	if len(ready) == 0 {
		return nil
	}
	h := ready[m.rnd.IntN(len(ready))]
	if c := m.calls[h]; c != nil && !c.dropped {
		return m.callReturns(h, c, quiet)
	}
	return m.callStarts(h)
}

// callEach advances every login that can: its call starts or returns.
func (m *model) callEach() error {
	for _, h := range m.core.all() {
		c, l := m.calls[h], m.logins[h]
		var err error
		switch {
		case c != nil && !c.dropped:
			err = m.callReturns(h, c, true)
		case l != nil && !m.now.Before(l.next):
			err = m.callStarts(h)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// callStarts is a login's next call, after awaitReturn.
func (m *model) callStarts(h *handlerState) error {
	l := m.logins[h]
	if m.core.closed {
		m.logf("%s: the login ends: closed", h.settings.ID)
		return m.endLogin(h, func() effects { e, _ := m.core.stopped(m.now, h, ErrClosed); return e })
	}
	if !h.callable() {
		// awaitReturn: a previous call, abandoned, still runs.
		if l.waitReturn.IsZero() {
			l.waitReturn = m.now.Add(h.settings.Timeout)
		}
		if m.now.Before(l.waitReturn) {
			return nil
		}
		m.logf("%s: its abandoned call has not returned: the login ends", h.settings.ID)
		err := &abandonedError{handler: h.settings.ID, timeout: h.settings.Timeout, again: true}
		return m.endLogin(h, func() effects { e, _ := m.core.stopped(m.now, h, err); return e })
	}
	if c := m.calls[h]; c != nil {
		return fmt.Errorf("%s: called while its call %d runs", h.settings.ID, c.n)
	}
	l.n++
	l.waitReturn = time.Time{}
	if l.n == 1 {
		if last, ok := m.lastCall[h]; ok && m.now.Sub(last) < h.settings.BackoffInitial {
			return fmt.Errorf("%s: logins %s apart, below its floor of %s", h.settings.ID, m.now.Sub(last), h.settings.BackoffInitial)
		}
	}
	m.lastCall[h] = m.now
	n := h.called(m.now)
	m.calls[h] = &modelCall{n: n, started: m.now, attempt: l.n}
	m.logf("%s: call %d (attempt %d)", h.settings.ID, n, l.n)
	return nil
}

// callReturns ends call c of h with a random outcome.
func (m *model) callReturns(h *handlerState, c *modelCall, quiet bool) error {
	l := m.logins[h]
	if l == nil {
		return fmt.Errorf("%s: a call returned to no login", h.settings.ID)
	}
	outcome := "credential"
	if !quiet {
		outcome = pick(m.rnd, "credential", "credential", "nothing", "error", "temporary", "permanent", "abandoned", "same", "expired", "short",
			"rejected", "renewed", "same")
	}
	if outcome == "rejected" && m.rejected[h] == nil {
		outcome = "credential"
	}
	if outcome == "abandoned" && h.settings.Timeout == 0 {
		outcome = "error"
	}
	if outcome == "abandoned" {
		// The attempt gives up at the timeout; the call runs on.
		c.dropped = true
		m.now = later(m.now, c.started.Add(h.settings.Timeout))
		h.abandoned = true
		m.logf("%s: call %d abandoned", h.settings.ID, c.n)
		return m.attemptFailed(h, l, c.attempt, &abandonedError{handler: h.settings.ID, timeout: h.settings.Timeout, cause: errors.New("deadline")})
	}
	delete(m.calls, h)
	h.callReturned(c.n)
	m.logf("%s: call %d returns %s", h.settings.ID, c.n, outcome)
	var err error
	switch outcome {
	case "nothing":
		err = errNoCredential
	case "error":
		err = errors.New("store down")
	case "temporary":
		err = login.Temporary(errors.New("throttled"), pick(m.rnd, 50*time.Millisecond, 5*time.Second, 10*time.Minute))
	case "permanent":
		err = &login.PermanentError{Err: errors.New("misconfigured")}
	default:
		cred := m.credential(h, outcome, quiet)
		e, unsound, err := m.core.returnedCredential(m.now, h, cred)
		if outcome == "rejected" && !errors.Is(err, errInvalidated) && !errors.Is(err, ErrClosed) {
			return fmt.Errorf("%s: gave again the credential the server rejected last, and the vault took it (%v)", h.settings.ID, err)
		}
		if err == nil {
			m.issued = append(m.issued, cred)
			m.logf("%s: accepted %s, usable until %s, refresh at %s", h.settings.ID, cred.Info.Token,
				at(cred.usableUntil), at(h.refreshAt))
			m.firstDone(h, l)
			delete(m.logins, h)
			if err := m.apply(e); err != nil {
				return err
			}
			if !cred.usable(m.now) {
				return fmt.Errorf("%s: accepted a credential already unusable", h.settings.ID)
			}
			if err := m.answer(h, cred.Info.RefreshAfter, false); err != nil {
				return err
			}
			return m.checkRefresh(h, unsound, nil)
		}
		m.logf("%s: refused: %v", h.settings.ID, err)
		if failed := m.attemptFailed(h, l, c.attempt, err); failed != nil || !errors.Is(err, errUnchanged) {
			return failed
		}
		return m.answer(h, cred.Info.RefreshAfter, true)
	}
	return m.attemptFailed(h, l, c.attempt, err)
}

func at(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(modelEpoch).Round(time.Millisecond).String()
}

// credential is what a handler returns: a new token (sometimes short-lived
// or already expired), its current one again (same), or its current token
// with a new expiration (renewed); any but a quiet one may ask for a
// recheck.
func (m *model) credential(h *handlerState, kind string, quiet bool) *Credential {
	if kind == "rejected" {
		info := *m.rejected[h]
		return &Credential{Handler: h.settings.ID, Info: &info, owner: h, digest: handlerconf.Digest(&info), route: &route{}}
	}
	token := ""
	if (kind == "same" || kind == "renewed") && h.cred != nil {
		token = h.cred.Info.Token
	} else {
		m.tokens++
		token = fmt.Sprintf("t%d", m.tokens)
	}
	info := &login.ConnectionInfo{Server: "https://api.example", Token: token, Priority: pick(m.rnd, 0, 0, 10, 30)}
	if !quiet {
		info.RefreshAfter = pick(m.rnd, 0, 0, 30*time.Second, 300*time.Millisecond, 5*time.Minute)
	}
	if (kind == "same" || kind == "renewed") && h.cred != nil {
		info.Priority, info.Expiration = h.cred.Info.Priority, h.cred.Info.Expiration
	}
	switch {
	case quiet && m.lifetime > 0:
		info.Expiration = m.now.Add(m.lifetime)
	case quiet:
	case kind == "expired":
		info.Expiration = m.now.Add(-time.Second)
	case kind == "short":
		info.Expiration = m.now.Add(pick(m.rnd, 5*time.Millisecond, 500*time.Millisecond, 3*time.Second))
	case kind == "credential", kind == "renewed":
		info.Expiration = pick(m.rnd, time.Time{}, m.now.Add(15*time.Minute), m.now.Add(time.Hour), m.now.Add(40*time.Second))
	}
	return &Credential{Handler: h.settings.ID, Info: info, owner: h, digest: handlerconf.Digest(info), route: &route{}}
}

// attemptFailed is the end of attempt n with err.
func (m *model) attemptFailed(h *handlerState, l *modelLogin, n int, err error) error {
	delete(m.answered, h)
	if n == 1 {
		m.firstDone(h, l)
	}
	e, retry, delay, _ := m.core.attemptFailed(m.now, h, n, err)
	var temporary *login.TemporaryError
	if !errors.As(err, &temporary) && delay > h.maxBackoff() {
		return fmt.Errorf("%s: a delay of %s, above its backoff's bound %s", h.settings.ID, delay, h.maxBackoff())
	}
	if retry {
		l.next = m.now.Add(delay)
		m.logf("%s: retry in %s", h.settings.ID, delay)
	} else {
		delete(m.logins, h)
		m.logf("%s: login ends: %v, retry at %s", h.settings.ID, err, at(h.retryAt))
	}
	if err := m.apply(e); err != nil {
		return err
	}
	if !retry {
		return m.checkRefresh(h, false, err)
	}
	return nil
}

// endLogin ends h's login before a call.
func (m *model) endLogin(h *handlerState, end func() effects) error {
	delete(m.answered, h)
	l := m.logins[h]
	m.firstDone(h, l)
	delete(m.logins, h)
	return m.apply(end())
}

// firstDone notes the end of the first attempt of h's login.
func (m *model) firstDone(h *handlerState, l *modelLogin) {
	if l != nil && !l.firstDone && m.round != nil {
		delete(m.round.pending, h)
	}
	if l != nil {
		l.firstDone = true
	}
}

// checkRefresh checks that h's credential, if it expires, is refreshed
// before it does: unless it lived no longer than the floor (unsound), it
// has less than the floor left, or a Temporary error asked for a later
// retry.
func (m *model) checkRefresh(h *handlerState, unsound bool, err error) error {
	c := h.cred
	if c == nil || c.usableUntil.IsZero() || h.running || m.core.closed {
		return nil
	}
	if h.refreshAt.IsZero() {
		return fmt.Errorf("%s: a credential usable until %s and no refresh", h.settings.ID, at(c.usableUntil))
	}
	var temporary *login.TemporaryError
	switch {
	case h.refreshAt.Before(c.usableUntil), unsound, errors.As(err, &temporary),
		c.usableUntil.Sub(m.now) <= h.settings.BackoffInitial:
		return nil
	}
	return fmt.Errorf("%s: refresh at %s, after its credential stops being usable at %s", h.settings.ID, at(h.refreshAt), at(c.usableUntil))
}

// lateReturn is the end of an abandoned call.
func (m *model) lateReturn() error {
	for _, h := range m.core.all() {
		if c := m.calls[h]; c != nil && c.dropped {
			delete(m.calls, h)
			h.callReturned(c.n)
			m.logf("%s: abandoned call %d returns", h.settings.ID, c.n)
			return nil
		}
	}
	return nil
}

// rejectStep makes the server refuse a credential handed out.
func (m *model) rejectStep(by invalidation) error {
	out := m.handedOut()
	if len(out) == 0 {
		return nil
	}
	c := out[m.rnd.IntN(len(out))]
	m.logf("%s: %s refused (%d)", c.Handler, c.Info.Token, by)
	var cause error = &UnauthorizedError{Server: c.Info.Server, Status: "401 Unauthorized", StatusCode: 401}
	if by == byTLSFailure {
		cause = &TLSError{Server: c.Info.Server, Err: errors.New("x509: unknown authority")}
	}
	retryAt := c.owner.retryAt
	e, ok, _ := m.core.invalidated(m.now, c, cause, by, rejection(cause, c))
	if !ok {
		return fmt.Errorf("%s: the handed-out credential %s was not invalidated", c.Handler, c.Info.Token)
	}
	if by != byTLSFailure {
		m.rejected[c.owner] = &login.ConnectionInfo{Server: c.Info.Server, Token: c.Info.Token, Priority: c.Info.Priority}
	}
	if h := c.owner; !h.retryAt.Equal(retryAt) && h.retryAt.Sub(m.now) > h.maxBackoff() {
		return fmt.Errorf("%s: retry at %s, beyond its backoff's bound", h.settings.ID, at(h.retryAt))
	}
	if _, again, _ := m.core.invalidated(m.now, c, cause, by, rejection(cause, c)); again {
		return fmt.Errorf("%s: %s invalidated twice", c.Handler, c.Info.Token)
	}
	return m.apply(e)
}

// lateRejectStep is a 401 for a credential its handler has replaced or lost
// since: it changes nothing.
func (m *model) lateRejectStep() error {
	var old []*Credential
	for _, c := range m.issued {
		if c.owner.cred != c {
			old = append(old, c)
		}
	}
	if len(old) == 0 {
		return nil
	}
	c := old[m.rnd.IntN(len(old))]
	h := c.owner
	m.logf("%s: late 401 for %s", c.Handler, c.Info.Token)
	cred, strikes, invalidated := h.cred, h.strikes, len(h.invalidated)
	cause := &UnauthorizedError{Server: c.Info.Server, StatusCode: 401}
	e, ok, _ := m.core.invalidated(m.now, c, cause, by401, rejection(cause, c))
	if ok || len(e.dropped) > 0 || e.publish || len(e.start) > 0 || h.cred != cred || h.strikes != strikes || len(h.invalidated) != invalidated {
		return fmt.Errorf("%s: a late 401 for %s, replaced since, changed the vault", c.Handler, c.Info.Token)
	}
	return nil
}

// serveStep makes a credential handed out serve a request.
func (m *model) serveStep() error {
	out := m.handedOut()
	if len(out) == 0 {
		return nil
	}
	c := out[m.rnd.IntN(len(out))]
	if !c.served.CompareAndSwap(false, true) {
		return nil
	}
	h := c.owner
	struck := h.strikes > 0 || h.loss.Kind == login.TLSFailure
	m.logf("%s: %s serves", c.Handler, c.Info.Token)
	if err := m.apply(m.core.served(m.now, h)); err != nil {
		return err
	}
	if h.strikes != 0 || h.loss.Kind == login.TLSFailure {
		return fmt.Errorf("%s: served, and still %d strikes (%s)", h.settings.ID, h.strikes, h.loss)
	}
	if struck && h.backoff != newBackoff(h.settings) {
		return fmt.Errorf("%s: served, and its backoff is still at %s", h.settings.ID, h.backoff.Duration)
	}
	return nil
}

// check is what holds after every step.
func (m *model) check() error {
	if err := m.checkDue(); err != nil {
		return err
	}
	// The snapshot's stale rule (handedOut's) makes this hold whatever the
	// core does; checkExpired checks the core's part.
	out := m.handedOut()
	for _, c := range out {
		if !c.usable(m.now) {
			return fmt.Errorf("%s: %s handed out at %s, usable until %s", c.Handler, c.Info.Token, at(m.now), at(c.usableUntil))
		}
	}
	for _, h := range m.core.all() {
		if l := m.logins[h]; m.core.settling && h.firstPending && (l == nil || l.firstDone) {
			return fmt.Errorf("%s: the round waits for its first attempt, which has finished", h.settings.ID)
		}
	}
	if r := m.round; r != nil {
		if len(out) > 0 || !m.loggingIn() {
			if len(r.pending) > 0 && m.now.Before(r.began.Add(m.core.opts.FirstLoginWait)) && len(out) > 0 {
				var ids []string
				for h := range r.pending {
					ids = append(ids, h.settings.ID)
				}
				slices.Sort(ids)
				return fmt.Errorf("credentials released %s into a round, before %v finished their first attempt", m.now.Sub(r.began), ids)
			}
			m.round = nil
		}
	}
	for _, h := range m.core.all() {
		b := h.backoff.Duration
		if b < h.settings.BackoffInitial || b > max(h.settings.BackoffMax, h.settings.BackoffInitial) {
			return fmt.Errorf("%s: backoff at %s, outside [%s, %s]", h.settings.ID, b, h.settings.BackoffInitial, h.settings.BackoffMax)
		}
		if h.running != (m.logins[h] != nil) {
			return fmt.Errorf("%s: running = %v, but a login under way = %v", h.settings.ID, h.running, m.logins[h] != nil)
		}
	}
	return nil
}

// checkDue checks that nothing due by now waits: the vault's timer fires
// at the core's deadline, so a deadline that leaves out a refresh, a retry
// above a lower priority or the end of a round's wait would let it pass.
func (m *model) checkDue() error {
	c := m.core
	if c.closed {
		return nil
	}
	if c.settling && !c.settleAt.After(m.now) {
		return fmt.Errorf("the round's wait ended at %s and still holds the credentials back", at(c.settleAt))
	}
	for _, h := range c.all() {
		if h.refreshDue(m.now) {
			return fmt.Errorf("%s: its refresh was due at %s and has not started", h.settings.ID, at(h.refreshAt))
		}
		if c.wantsRetryAbove(h) && h.idle(m.now) {
			return fmt.Errorf("%s: its login above what serves was due at %s and has not started", h.settings.ID, at(h.retryAt))
		}
	}
	return nil
}

// loggingIn tells whether a login runs.
func (m *model) loggingIn() bool { return len(m.logins) > 0 }

// serve runs half an hour in which every call gives a credential that lives
// lifetime, logins take a second or two, and callers ask often: once a
// credential is handed out, one is at every step, through every expiry.
func (m *model) serve(lifetime time.Duration) error {
	m.lifetime = lifetime
	m.logf("serving with credentials of %s", lifetime)
	if err := m.apply(m.core.refreshAll(m.now)); err != nil {
		return err
	}
	served := false
	for end := m.now.Add(30 * time.Minute); m.now.Before(end); {
		// Logins run side by side, each a step at a time; callers ask
		// after the clock moves, as they do all the time.
		for _, step := range []func() error{m.lateReturn, m.callEach, func() error { return m.advance(time.Second) },
			m.selectCred, m.check} {
			if err := step(); err != nil {
				return err
			}
		}
		out := len(m.handedOut()) > 0
		if served && !out {
			return fmt.Errorf("nothing handed out at %s, with credentials of %s refreshed in the background", at(m.now), lifetime)
		}
		served = served || out
	}
	if !served {
		return errors.New("nothing handed out in half an hour of logins that succeed")
	}
	return nil
}

// settle stops the events: calls return credentials that never expire,
// abandoned ones return, the clock moves on. The core must come to rest:
// no login under way, nothing due.
func (m *model) settle() error {
	m.logf("quiet")
	limit := m.now.Add(time.Hour)
	for m.now.Before(limit) {
		if len(m.logins) == 0 && len(m.calls) == 0 && m.core.deadline().IsZero() {
			return nil
		}
		if err := m.lateReturn(); err != nil {
			return err
		}
		if err := m.callStep(true); err != nil {
			return err
		}
		if err := m.selectCred(); err != nil {
			return err
		}
		if err := m.advance(time.Second); err != nil {
			return err
		}
		if err := m.check(); err != nil {
			return err
		}
	}
	var busy []string
	for h := range m.logins {
		busy = append(busy, h.settings.ID)
	}
	return fmt.Errorf("no steady state an hour after the events stopped: logins under way %v, next deadline %s", busy, at(m.core.deadline()))
}
