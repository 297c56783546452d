package vault

import (
	"context"
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
	v.drain.note()
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
			err := v.core.loginError(callerErr)
			v.mu.Unlock()
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
