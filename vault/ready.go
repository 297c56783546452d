package vault

import (
	"net/http"
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
	if v.core.closed {
		return ErrClosed
	}
	e, err := v.core.ready(v.clock.Now())
	v.applyLocked(e)
	v.freshLocked()
	return err
}
