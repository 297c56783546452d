package login

import (
	"context"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
)

// Handler fetches one credential. It returns (nil, nil) when it has nothing
// to offer (for example, an in-cluster handler outside a cluster), an error
// when the attempt failed, and a new *ConnectionInfo otherwise.
//
// A Handler must honour ctx: the vault cancels it on timeout and on Close.
// It may be called again while an earlier call's credential is still in use,
// but never concurrently with itself by the same vault.
type Handler func(ctx context.Context) (*ConnectionInfo, error)

// Unlimited is the Retries value that never stops retrying.
const Unlimited = -1

// Option sets how the vault runs a handler, given when the handler is
// registered: [ID], [Retries], [Backoff] and [Timeout] make them. The zero
// Option sets nothing.
type Option struct {
	set func(*handlerconf.Settings)
}

func init() {
	handlerconf.Apply = func(opt any, s *handlerconf.Settings) {
		if o, ok := opt.(Option); ok && o.set != nil {
			o.set(s)
		}
	}
}

// ID names the handler in logs, metrics, errors and credentials. Without it,
// the handler is named after its function, without its package path.
func ID(name string) Option { return Option{func(s *handlerconf.Settings) { s.ID = name }} }

// Retries limits how often a failed attempt is retried before the login
// gives up on the handler for the round; Unlimited (the default) retries
// until the handler succeeds or returns a Permanent error.
func Retries(n int) Option { return Option{func(s *handlerconf.Settings) { s.Retries = n }} }

// Backoff sets the exponential delay between failed attempts: it starts at
// initial, doubles with some jitter, and never exceeds max. initial is also
// the login floor: the vault starts two logins of the handler at least
// initial apart, however short its credentials live. Defaults: 1 s and
// 1 min.
func Backoff(initial, max time.Duration) Option {
	return Option{func(s *handlerconf.Settings) { s.BackoffInitial, s.BackoffMax = initial, max }}
}

// Timeout bounds each attempt: its context ends after d. A handler that
// ignores its context is abandoned after d, and its late result is dropped.
// Default: none.
func Timeout(d time.Duration) Option { return Option{func(s *handlerconf.Settings) { s.Timeout = d }} }

// Registration is a handler with the options to register it with, for
// lists of handlers such as a vault's fallback.
type Registration struct {
	Handler Handler
	Options []Option
}
