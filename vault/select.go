package vault

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"
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
	if v.drain.on.Load() { // Shutdown waits for the asks to stop
		v.drain.asked.Add(1)
	}
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
		if v.core.closed {
			v.mu.Unlock()
			return nil, ErrClosed
		}
		e, _, wait, err := v.core.wanted(v.clock.Now())
		v.applyLocked(e)
		v.freshLocked()
		if c := v.snap.Load().pick(); c != nil {
			v.mu.Unlock()
			return c, nil
		}
		if !wait {
			v.mu.Unlock()
			v.refused(err)
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
			err := v.core.loginError(v.clock.Now(), callerErr)
			v.mu.Unlock()
			v.refused(err)
			return nil, err
		}
		if c := v.snap.Load().pick(); c != nil {
			return c, nil
		}
	}
}

// freshLocked publishes anew a snapshot marked stale with nothing expired
// (the wall clock went back), with a new timer.
func (v *Vault) freshLocked() {
	if v.snap.Load().stale.Load() {
		v.publishLocked(v.core.creds(), v.core.settling)
	}
}

// publishLocked makes creds what Select hands out, unless held, and wakes
// the waiters.
func (v *Vault) publishLocked(creds []*Credential, held bool) {
	s := newSnapshot(creds)
	s.held = held
	t := &v.timers
	if t.expiry != nil {
		t.expiry.Stop()
		t.expiry = nil
	}
	if !s.soonest.IsZero() {
		// The callback takes no lock: a fake clock calls it under its own.
		if d := s.soonest.Sub(v.clock.Now()); d > 0 {
			t.expiry = v.clock.AfterFunc(d, func() { s.stale.Store(true) })
		} else {
			s.stale.Store(true)
		}
	}
	v.logServingLocked(s) // before a caller can see it
	v.snap.Store(s)
	v.broadcastLocked()
}

// broadcastLocked wakes every waiter.
func (v *Vault) broadcastLocked() {
	close(v.changed)
	v.changed = make(chan struct{})
}

// logServingLocked says, once for each change, whose credentials the vault
// hands out now: the handlers of s's highest priority. An empty vault says
// nothing (the login that follows does), so a handler that comes back after
// its credential was rejected is not announced again; nor does a snapshot
// whose credentials are held back for a first login.
func (v *Vault) logServingLocked(s *snapshot) {
	if v.core.closed || s.held || len(s.groups) == 0 {
		return
	}
	top := s.groups[0]
	ids := make([]string, 0, len(top))
	for _, c := range top {
		ids = append(ids, c.Handler)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if slices.Equal(ids, v.serving) {
		return
	}
	v.serving = ids
	first := top[0]
	if first.owner != nil && first.owner.fallback {
		why := "no login handler registered: using a fallback"
		if len(v.core.handlers) > 0 {
			why = "using a fallback: no registered login handler has a credential"
		}
		// The fallback's "logged in" was at V(1) (core.offstage): this
		// line says all of it, and which file and context a kubeconfig's
		// credential came from.
		kv := []any{"handler", first.Handler}
		if first.whence != "" {
			kv = append(kv, "from", first.whence)
		}
		v.log.Info(why, append(kv, "fingerprint", first.fingerprint, "server", first.Info.Server,
			"priority", first.Info.Priority, "expiration", expirationValue(first.Info.Expiration),
			"why", "the highest-priority fallback that gave a credential")...)
		return
	}
	if len(ids) > 1 {
		v.log.Info("serving", "handlers", ids, "priority", first.Info.Priority)
		return
	}
	v.log.Info("serving", "handler", first.Handler, "server", first.Info.Server, "priority", first.Info.Priority,
		"expiration", expirationValue(first.Info.Expiration))
}

// snapshot is the immutable set of usable credentials that Select reads
// without a lock. A change to the vault publishes a new one.
type snapshot struct {
	// groups holds the credentials by rank, the highest first.
	groups [][]*Credential
	// soonest is the earliest usableUntil of all of them; zero if none
	// expires.
	soonest time.Time
	// stale is set by a timer when soonest passes. Select then takes the
	// slow path, which drops what expired: the hot path reads no clock.
	stale atomic.Bool
	// held tells that a login on an empty vault is still waiting for
	// handlers' first attempts: the credentials are not handed out yet.
	held bool
}

// pick returns a random credential of the highest priority, or nil when the
// snapshot is empty, held back, or may hold an expired credential.
func (s *snapshot) pick() *Credential {
	if len(s.groups) == 0 || s.held || s.stale.Load() {
		return nil
	}
	top := s.groups[0]
	if len(top) == 1 {
		return top[0]
	}
	return top[rand.IntN(len(top))]
}

// routeFor returns the route of a credential for the server b, or nil.
func (s *snapshot) routeFor(b base) *route {
	for _, g := range s.groups {
		for _, c := range g {
			if c.route.base == b {
				return c.route
			}
		}
	}
	return nil
}

func (s *snapshot) size() int {
	n := 0
	for _, g := range s.groups {
		n += len(g)
	}
	return n
}

// newSnapshot groups creds by descending rank.
func newSnapshot(creds []*Credential) *snapshot {
	if len(creds) == 0 {
		// A new one each time, never one shared by every vault: the
		// caller sets held on it.
		return &snapshot{}
	}
	creds = slices.Clone(creds)
	slices.SortStableFunc(creds, func(a, b *Credential) int { return compareRanks(b.rank(), a.rank()) })
	s := &snapshot{}
	for i, c := range creds {
		if i == 0 || c.rank() != creds[i-1].rank() {
			s.groups = append(s.groups, nil)
		}
		last := len(s.groups) - 1
		s.groups[last] = append(s.groups[last], c)
		if !c.usableUntil.IsZero() && (s.soonest.IsZero() || c.usableUntil.Before(s.soonest)) {
			s.soonest = c.usableUntil
		}
	}
	return s
}
