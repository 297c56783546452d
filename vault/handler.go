package vault

import (
	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// configure applies opts over the defaults for h.
func configure(h login.Handler, opts ...login.Option) handlerconf.Settings {
	return handlerconf.Configure(h, opts...)
}

// enter counts a handler call among those Close waits for, unless Close
// has begun: it tells whether the call may run. The call runs in a
// goroutine of its own (see callHandler) and ends with calls.Done.
func (l *lifecycle) enter() bool {
	l.spawnMu.Lock()
	defer l.spawnMu.Unlock()
	if l.stopping {
		return false
	}
	l.calls.Add(1)
	return true
}

// served notes that cred got an answer other than 401. The first time, its
// handler's strikes, or its TLS failures, and their backoff are cleared
// (see core.served); later times cost an atomic load.
func (v *Vault) served(cred *Credential) {
	if cred.served.Load() || !cred.served.CompareAndSwap(false, true) || cred.owner == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.applyLocked(v.core.served(v.clock.Now(), cred.owner))
}
