package login

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// PermanentError is a failure that retrying cannot fix; the vault stops
// retrying the handler for this round at once. Its message is Err's: the
// mark is in the type.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return errorText(e.Err) }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as not worth retrying.
func Permanent(err error) error { return &PermanentError{Err: err} }

// TemporaryError is a failure worth retrying after Delay, whatever the
// handler's backoff says. Its message is Err's.
type TemporaryError struct {
	Err   error
	Delay time.Duration
}

func (e *TemporaryError) Error() string { return errorText(e.Err) }
func (e *TemporaryError) Unwrap() error { return e.Err }

// Temporary asks for a retry after delay.
func Temporary(err error, delay time.Duration) error {
	return &TemporaryError{Err: err, Delay: delay}
}

// PanicError is the failure of an attempt whose handler panicked. It carries
// the panic value, and deliberately no stack: the stack's arguments may hold
// secrets.
//
// A panic value may hold a secret too (a token in a message, a credential
// struct), so every printed form — Error, every fmt verb, JSON, logr — shows
// the value's type, never its content. Code that reads Value must not print
// it either.
type PanicError struct {
	Handler string
	Value   any `json:"-"`
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("login: handler %q panicked with a value of type %s", e.Handler, valueType(e.Value))
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Format prints Error's text for every verb (%q quotes it), for a
// PanicError and a pointer to one alike, so %+v and %#v never reach Value.
func (e PanicError) Format(f fmt.State, verb rune) {
	s := e.Error()
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	_, _ = f.Write([]byte(s))
}

// GoString is Error's text, for %#v.
func (e PanicError) GoString() string { return e.Error() }

// panicView is what JSON and logr show of a PanicError.
type panicView struct {
	Handler   string `json:"handler"`
	ValueType string `json:"valueType"`
}

// MarshalJSON encodes the handler and the value's type.
func (e PanicError) MarshalJSON() ([]byte, error) {
	return json.Marshal(panicView{Handler: e.Handler, ValueType: valueType(e.Value)})
}

// MarshalLog implements logr.Marshaler: the handler and the value's type.
func (e PanicError) MarshalLog() any {
	return panicView{Handler: e.Handler, ValueType: valueType(e.Value)}
}

func valueType(v any) string { return fmt.Sprintf("%T", v) }

// ErrAbandoned is the cause of an attempt that outlived its Timeout
// without returning.
var ErrAbandoned = errors.New("login: handler did not return within its timeout")

func errorText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
