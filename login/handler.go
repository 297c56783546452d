package login

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"time"
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

// Defaults of the handler options.
const (
	DefaultBackoffInitial = time.Second
	DefaultBackoffMax     = time.Minute
)

// Settings are a handler's options once applied. The zero value is not
// useful; Configure fills in the defaults.
type Settings struct {
	// ID names the handler in logs, metrics, errors and credential keys.
	// Default: the handler function's name, without its package path.
	ID string
	// Retries is how many times a failed attempt is retried before the
	// login gives up on this handler for the round. Default: Unlimited.
	Retries int
	// BackoffInitial and BackoffMax bound the exponential delay (factor 2,
	// with jitter) between failed attempts; BackoffInitial is also the
	// least time between two logins. Defaults: 1 s and 1 min.
	BackoffInitial, BackoffMax time.Duration
	// Timeout bounds one attempt through its context. Default: none.
	Timeout time.Duration
}

// Option sets one of a handler's Settings.
type Option func(*Settings)

// ID names the handler. Without it, the handler is named after its function.
func ID(name string) Option { return func(s *Settings) { s.ID = name } }

// Retries limits how often a failed attempt is retried; Unlimited (the
// default) retries until the handler succeeds or returns a Permanent error.
func Retries(n int) Option { return func(s *Settings) { s.Retries = n } }

// Backoff sets the exponential delay between failed attempts: it starts at
// initial, doubles with some jitter, and never exceeds max. initial is also
// the login floor: the vault starts two logins of the handler at least
// initial apart, however short its credentials live.
func Backoff(initial, max time.Duration) Option {
	return func(s *Settings) { s.BackoffInitial, s.BackoffMax = initial, max }
}

// Timeout bounds each attempt: its context ends after d. A handler that
// ignores its context is abandoned after d, and its late result is dropped.
func Timeout(d time.Duration) Option { return func(s *Settings) { s.Timeout = d } }

// Configure applies opts over the defaults for h.
func Configure(h Handler, opts ...Option) Settings {
	s := Settings{
		Retries:        Unlimited,
		BackoffInitial: DefaultBackoffInitial,
		BackoffMax:     DefaultBackoffMax,
	}
	for _, opt := range opts {
		opt(&s)
	}
	if s.ID == "" {
		s.ID = FuncName(h)
	}
	if s.BackoffInitial <= 0 {
		s.BackoffInitial = DefaultBackoffInitial
	}
	if s.BackoffMax < s.BackoffInitial {
		s.BackoffMax = s.BackoffInitial
	}
	if s.Retries < 0 {
		s.Retries = Unlimited
	}
	return s
}

// FuncName is the name of h's function without its package path
// ("main.login", "vault_test.TestX.func1"), or "handler" when unknown.
func FuncName(h Handler) string {
	if h == nil {
		return "handler"
	}
	fn := runtime.FuncForPC(reflect.ValueOf(h).Pointer())
	if fn == nil {
		return "handler"
	}
	name := fn.Name()
	if slash := strings.LastIndexByte(name, '/'); slash >= 0 {
		name = name[slash+1:]
	}
	// A method value's function is named "pkg.(*T).M-fm".
	return strings.TrimSuffix(name, "-fm")
}

// Registration is a handler with the options to register it with, for
// lists of handlers such as a vault's fallback.
type Registration struct {
	Handler Handler
	Options []Option
}
