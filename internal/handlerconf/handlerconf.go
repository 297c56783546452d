// Package handlerconf is the part of a login handler's configuration that
// the vault needs and a handler author does not: the settings its options
// set, their defaults, its name when it has no ID, and the digest of a
// credential's authentication material. Package login owns the options, the
// credential type and the handlers that name themselves; it fills in
// [Digest] and [Named] when it is loaded.
package handlerconf

import (
	"crypto/sha256"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Unlimited is login.Unlimited, the Retries value that never stops
// retrying (handlerconf_test checks that they agree).
const Unlimited = -1

// Defaults of the handler options.
const (
	DefaultBackoffInitial = time.Second
	DefaultBackoffMax     = time.Minute
)

// Settings are a handler's options once applied. The zero value is not
// useful; Configure fills in the defaults.
type Settings struct {
	// ID names the handler in logs, errors and credentials. Default: the
	// name the handler gives itself (login.Named, or a function given to
	// NameFunc), else the handler function's name without its package
	// path.
	ID string
	// Label is the handler's label value in metrics: short and stable.
	// Default: the label the handler gives itself with its name, else ID.
	Label string
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

// Configure applies opts (login.Option values) over the defaults for the
// handler h.
func Configure[O any](h any, opts ...O) Settings {
	s := Settings{
		Retries:        Unlimited,
		BackoffInitial: DefaultBackoffInitial,
		BackoffMax:     DefaultBackoffMax,
	}
	for _, opt := range opts {
		Apply(opt, &s)
	}
	if s.ID == "" {
		s.ID, s.Label = nameOf(h)
	}
	if s.Label == "" {
		s.Label = s.ID
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

// Named tells the name and label of a handler that login.Named made, and
// false for any other. Package login sets it: the type is login's.
var Named func(h any) (name, label string, ok bool)

// funcNames are the names of plain functions that name themselves, by
// code pointer: a closure's code is shared by every closure of its
// literal, a function's is its own.
var funcNames sync.Map // uintptr → [2]string{name, label}

// NameFunc gives fn, a plain function (not a closure nor a method value),
// a name and a label, as login.Named gives a handler made from a closure:
// piggyback's ServiceAccount, Kubeconfig and ClientGo, which are plain
// functions.
func NameFunc(fn any, name, label string) {
	if p, ok := codePointer(fn); ok {
		funcNames.Store(p, [2]string{name, label})
	}
}

// nameOf is the name and label h gives itself, else its function's name
// and no label.
func nameOf(h any) (name, label string) {
	if Named != nil {
		if name, label, ok := Named(h); ok && name != "" {
			return name, label
		}
	}
	if p, ok := codePointer(h); ok {
		if n, ok := funcNames.Load(p); ok {
			return n.([2]string)[0], n.([2]string)[1]
		}
	}
	return FuncName(h), ""
}

// codePointer is the code h runs, when h is a non-nil function.
func codePointer(h any) (uintptr, bool) {
	v := reflect.ValueOf(h)
	if v.Kind() != reflect.Func || v.IsNil() {
		return 0, false
	}
	return v.Pointer(), true
}

// FuncName is the name of the function h without its package path
// ("main.login", "vault_test.TestX.func1"), or "handler" when unknown.
func FuncName(h any) string {
	p, ok := codePointer(h)
	if !ok {
		return "handler"
	}
	fn := runtime.FuncForPC(p)
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

// Apply applies a login.Option to s. Package login sets it: the option
// type is login's, and opaque to its users.
var Apply func(opt any, s *Settings)

// Digest identifies the authentication material of a *login.ConnectionInfo:
// its server, basic auth, scheme and token, client certificate and key, and
// own Transport. Two values with equal digests authenticate the same way,
// so the server would accept or reject both. It is an HMAC-SHA-256 keyed
// per process, safe to keep where a secret must not be. Package login sets
// it: the type and its fields are login's.
var Digest func(info any) [sha256.Size]byte
