package login

import (
	"errors"
	"fmt"
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
type PanicError struct {
	Handler string
	Value   any
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("login: handler %q panicked: %v", e.Handler, e.Value)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ErrAbandoned is the cause of an attempt that outlived its Timeout
// without returning.
var ErrAbandoned = errors.New("login: handler did not return within its timeout")

func errorText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
