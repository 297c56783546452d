package login

import (
	"context"
	"reflect"
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

// ID names the handler in logs, errors, credentials and the handler label of
// metrics. Without it, a handler that names itself (Named: every handler
// this module and its cloud modules make) goes by its name in logs and by
// its short label in metrics, and any other by its function's name, without
// its package path, in both.
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

// Named returns h under a name and a metric label of its own, for packages
// that make handlers: the vault then calls the handler name in logs,
// errors, LoginErrors and Credential.Handler, and label in the handler
// label of its metrics, unless ID names it otherwise (then both). The name
// says what the handler reads ("token file /var/run/secrets/tokens/api",
// "kubeconfig Secret capi/prod-kubeconfig"); the label says what kind of
// source it is ("token file", "kubeconfig Secret"), short and stable, so
// that a path or an object's name never becomes a label value (a vault
// numbers a second handler of one label: "token file#2"); without one,
// the label is h's function name, never name. Neither may hold a secret:
// redact a URL's user info before it goes into name.
//
// Named handlers are how this module's handlers name themselves; it is
// exported for the cloud modules and for packages of handlers like them.
func Named(name, label string, h Handler) Handler {
	return (&named{name: name, label: label, h: h}).login
}

// named is a handler that Named made.
type named struct {
	name, label string
	h           Handler
}

// login calls the handler, unless ctx asks for its name (see nameOf): the
// vault asks once, when the handler is registered.
func (n *named) login(ctx context.Context) (*ConnectionInfo, error) {
	if q, ok := ctx.Value(nameQuery{}).(*named); ok {
		*q = *n
		return nil, nil
	}
	return n.h(ctx)
}

// nameQuery is the context key that asks a named handler its name.
type nameQuery struct{}

// namedCode is the code of every handler Named makes: a method value's
// code is its method's wrapper, whatever its receiver.
var namedCode = reflect.ValueOf((&named{}).login).Pointer()

// nameOf is the name and label of h when Named made it (without a name:
// the wrapped function's): only such a handler is called to ask, and it
// answers without calling the handler it wraps.
func nameOf(h any) (name, label string, ok bool) {
	var fn Handler
	switch h := h.(type) {
	case Handler:
		fn = h
	case func(context.Context) (*ConnectionInfo, error):
		fn = h
	}
	if fn == nil || reflect.ValueOf(fn).Pointer() != namedCode {
		return "", "", false
	}
	var q named
	_, _ = fn(context.WithValue(context.Background(), nameQuery{}, &q))
	if q.label == "" {
		// Never the name: it may hold a path or an object's name.
		q.label = handlerconf.FuncName(q.h)
	}
	if q.name == "" {
		return handlerconf.FuncName(q.h), q.label, true
	}
	return q.name, q.label, true
}

func init() { handlerconf.Named = nameOf }
