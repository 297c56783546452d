package vault

import (
	"context"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// configure applies opts over the defaults for h.
func configure(h login.Handler, opts ...login.Option) handlerconf.Settings {
	return handlerconf.Configure(h, opts...)
}

// tracked wraps h so that Close can wait for its calls, which run in
// goroutines of their own (see callHandler).
func (v *Vault) tracked(h login.Handler) login.Handler {
	return func(ctx context.Context) (*login.ConnectionInfo, error) {
		v.life.spawnMu.Lock()
		if v.life.stopping {
			v.life.spawnMu.Unlock()
			return nil, ErrClosed
		}
		v.life.calls.Add(1)
		v.life.spawnMu.Unlock()
		defer v.life.calls.Done()
		return h(ctx)
	}
}

// served notes that cred got an answer other than 401. The first time, its
// handler's strikes, or its TLS failures, and their backoff are cleared
// (see handlerState.served); later times cost an atomic load.
func (v *Vault) served(cred *Credential) {
	if cred.served.Load() || !cred.served.CompareAndSwap(false, true) || cred.owner == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	cred.owner.served()
}
