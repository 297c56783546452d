package vault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// callHandler calls h once under s: its context ends after s.Timeout, a panic
// becomes a *login.PanicError, and a credential that fails Validate becomes
// an error. The call runs in a goroutine of its own so that a handler that
// ignores its context cannot hold the caller: once ctx ends, callHandler returns
// and the handler's late result, whenever it comes, is dropped.
func callHandler(ctx context.Context, s handlerconf.Settings, h login.Handler) (*login.ConnectionInfo, error) {
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	type result struct {
		info *login.ConnectionInfo
		err  error
	}
	done := make(chan result, 1) // buffered: an abandoned call must not block
	go func() {
		var r result
		defer func() {
			if v := recover(); v != nil {
				r = result{err: &login.PanicError{Handler: s.ID, Value: v}}
			}
			done <- r
		}()
		r.info, r.err = h(ctx)
	}()
	select {
	case r := <-done:
		return checkResult(r.info, r.err)
	case <-ctx.Done():
		// The result may have arrived at the same moment: prefer it.
		select {
		case r := <-done:
			return checkResult(r.info, r.err)
		default:
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &abandonedError{handler: s.ID, timeout: s.Timeout, cause: context.Cause(ctx)}
		}
		return nil, context.Cause(ctx)
	}
}

func checkResult(info *login.ConnectionInfo, err error) (*login.ConnectionInfo, error) {
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, nil
	}
	if err := info.Validate(); err != nil {
		return nil, &invalidInfoError{err: err}
	}
	return info, nil
}

// invalidInfoError is the failure of an attempt whose handler returned a
// ConnectionInfo that fails Validate: a bug in the handler.
type invalidInfoError struct{ err error }

func (e *invalidInfoError) Error() string {
	return "returned an invalid ConnectionInfo: " + e.err.Error()
}
func (e *invalidInfoError) Unwrap() error { return e.err }

// abandonedError is the outcome of an attempt that gave up on its handler's
// call at the handler's timeout, or, with again, of one that did not call
// the handler because that abandoned call had still not returned. It names
// the handler and the timeout, the two things to look at; errors.Is matches
// login.ErrAbandoned (and, with again, errStillRunning).
type abandonedError struct {
	handler string
	timeout time.Duration
	again   bool
	cause   error // the attempt's context's cause: context.DeadlineExceeded
}

func (e *abandonedError) Error() string {
	return fmt.Sprintf("vault: handler %q %s", e.handler, e.what())
}

// what is the error's text after the handler's name, which a LoginError's
// outcome gives already.
func (e *abandonedError) what() string {
	if e.again {
		return fmt.Sprintf("was not called again: its previous call, abandoned after %s, has not returned", e.timeout)
	}
	return fmt.Sprintf("did not return within %s", e.timeout)
}

func (e *abandonedError) Unwrap() []error {
	if e.again {
		return []error{errStillRunning}
	}
	return []error{login.ErrAbandoned, e.cause}
}
