package vault

import (
	"fmt"
	"net/http"
	"time"
)

// Ready reports whether the vault can authenticate requests, as a readiness
// check: its signature is controller-runtime's healthz.Checker, so
//
//	mgr.AddReadyzCheck("authvault", v.Ready)
//
// makes a pod unready while its operator cannot reach the API server as
// itself. It returns nil while a credential is usable, or while the vault
// is logging in and has been without a usable credential for less than
// [Options.ReadyGrace] (the first login of a starting process: the probe
// itself starts it if nothing has). Retries after a failed round do not
// restart the grace. Once a login round has ended without a credential, or
// the vault has been logging in without one longer than the grace, it
// returns the *LoginError that a caller would get. It never waits.
func (v *Vault) Ready(_ *http.Request) error {
	if v.snap.Load().pick() != nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return ErrClosed
	}
	v.dropExpiredLocked()
	if v.usableLocked() {
		return nil
	}
	if !v.first.settling {
		v.startDueLocked()
	}
	if !v.loggingInLocked() {
		return v.loginErrorLocked(nil)
	}
	if v.roundStart.IsZero() {
		// A login that began as a refresh, whose credential has gone
		// since: the grace counts from now.
		v.roundStart = v.clock.Now()
	}
	if v.clock.Since(v.roundStart) < v.opts.ReadyGrace {
		return nil
	}
	return v.loginErrorLocked(fmt.Errorf("vault: without a usable credential, logging in, for %s", v.clock.Since(v.roundStart).Round(time.Millisecond)))
}

// usableLocked tells whether any handler holds a usable credential, held
// back for the first-login wait or not.
func (v *Vault) usableLocked() bool {
	now := v.clock.Now()
	for _, h := range v.allLocked() {
		if h.cred != nil && h.cred.usable(now) {
			return true
		}
	}
	return false
}
