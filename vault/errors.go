package vault

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// Errors callers can act on. They are matched with errors.Is, also through a
// LoginError.
var (
	// ErrClosed is returned by a closed vault.
	ErrClosed = errors.New("vault: the vault is closed")
	// ErrNoHandlers means no login handler is registered and no fallback is set.
	ErrNoHandlers = errors.New("vault: no login handler is registered")
	// ErrMaxWait means the caller waited Options.MaxWait for a credential
	// while a login was under way; the login goes on.
	ErrMaxWait = errors.New("vault: the caller waited Options.MaxWait for a credential")
)

// maxWaitError is a LoginError's Err when the caller waited MaxWait: it
// says how long, and is ErrMaxWait to errors.Is.
type maxWaitError struct{ wait time.Duration }

func (e *maxWaitError) Error() string {
	return fmt.Sprintf("vault: waited %v for a credential (Options.MaxWait), logins go on", e.wait)
}

func (e *maxWaitError) Unwrap() error { return ErrMaxWait }

// Outcomes of a login that gave no credential, reported in a LoginError's
// Handlers; a caller cannot act on them beyond the error's text.
var (
	// errNoCredential: the handler returned (nil, nil), or said what it
	// looked for (see noCredentialError).
	errNoCredential = errors.New("vault: the handler returned no credential")
	// errInvalidated: the handler returned a credential the vault
	// invalidated a moment ago (same authentication material).
	errInvalidated = errors.New("vault: the handler returned a credential that was invalidated a moment ago")
	// errExpired: the credential has expired, or expires within the
	// vault's leeway.
	errExpired = errors.New("vault: the handler returned an expired credential")
	// errUnchanged: a refresh returned the credential the vault already
	// has, with no later expiration.
	errUnchanged = errors.New("vault: the handler's refresh returned the credential the vault already has")
	// errRejectedAtOnce: the server rejected the handler's new credential
	// before any request with it succeeded: the handler, or the cluster's
	// authenticator, is failing, and logging in again right away would
	// only repeat it.
	errRejectedAtOnce = errors.New("vault: the server rejected the handler's new credential at once")
	// errStillRunning: the handler's previous call, abandoned at its
	// timeout, has not returned, so it was not called again.
	errStillRunning = fmt.Errorf("vault: the handler was not called again: its previous call has not returned: %w", login.ErrAbandoned)
)

// noCredentialError is the outcome of a built-in handler that had nothing
// to offer and said what it looked for (internal/absent): errNoCredential
// to errors.Is, with what is missing.
type noCredentialError struct{ what string }

func (e *noCredentialError) Error() string {
	return "vault: the handler returned no credential: " + e.what
}

func (e *noCredentialError) Is(target error) bool { return target == errNoCredential }

// reofferedError is errInvalidated for a credential a server's 401
// invalidated: its text is errInvalidated's, and errors.As finds the 401
// (an UnauthorizedError), whose challenge tells the log's action what to
// advise (a service's audience).
type reofferedError struct{ rejection error }

func (e *reofferedError) Error() string   { return errInvalidated.Error() }
func (e *reofferedError) Unwrap() []error { return []error{errInvalidated, e.rejection} }

// LoginError is what callers get when the vault has no usable credential and
// logging in did not give one. Its message says what failed and when the
// vault logs in again, or, when every handler had nothing to offer, what is
// missing; its fields hold every handler's outcome, the server that last
// rejected a credential and why, and, when the caller gave up, the caller's
// context error. errors.Is and errors.As see through it to every one of
// those errors.
type LoginError struct {
	// Handlers are the outcomes of the handlers the vault ran, in the
	// order they were registered.
	Handlers []Outcome
	// Server is the server of the last credential invalidated, if any.
	Server string
	// Cause is why the last credential was invalidated (the 401), if any.
	Cause error
	// Err is why the caller stopped waiting (its context's error, or
	// ErrMaxWait), or ErrNoHandlers; nil when every handler has finished.
	Err error
}

// Outcome is how a handler's latest login went.
type Outcome struct {
	Handler string
	// Err is the last error: a handler's own, or the vault's reason for
	// refusing what it returned. Nil while a first attempt runs.
	Err error
	// Running tells that the handler is still logging in.
	Running bool
	// RetryAt is when the handler may run again, if it failed or gave
	// nothing: the next caller after it starts a login. Zero once it has
	// passed, as when the error was made.
	RetryAt time.Time
	// Held tells that its credential is held back for other handlers' first attempts.
	Held bool
}

// String says how the handler's login went, and when it logs in again if
// it failed.
func (o Outcome) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "handler %q", o.Handler)
	var abandoned *abandonedError
	switch {
	case o.gaveNothing():
		// Asking it again gives nothing again, until what it reads
		// appears: no next login to promise.
		b.WriteString(" gave nothing")
		if what := o.missing(); what != "" {
			b.WriteString(": " + what)
		}
		return redact.URL(b.String())
	case o.Held:
		b.WriteString(" gave a credential, held back until the other handlers finish their first attempt")
	case o.Running && o.Err == nil:
		b.WriteString(" is still logging in")
	case o.Running:
		fmt.Fprintf(&b, " is still retrying after: %v", o.Err)
	case o.Err == nil:
		b.WriteString(" has not run")
	case errors.As(o.Err, &abandoned) && abandoned == o.Err && abandoned.handler == o.Handler:
		b.WriteString(" " + abandoned.what()) // the error would name the handler again
	default:
		fmt.Fprintf(&b, ": %v", o.Err)
	}
	if !o.RetryAt.IsZero() {
		fmt.Fprintf(&b, " (next login at %s)", o.RetryAt.UTC().Format(time.RFC3339))
	}
	return redact.URL(b.String())
}

// gaveNothing tells that the handler's login ended with nothing to offer.
func (o Outcome) gaveNothing() bool {
	return !o.Running && !o.Held && errors.Is(o.Err, errNoCredential)
}

// missing is what a handler that gave nothing said it looked for, or "".
func (o Outcome) missing() string {
	var none *noCredentialError
	if errors.As(o.Err, &none) {
		return none.what
	}
	return ""
}

// Error puts the short cause first: the server's answer to the last
// credential (its 401), then why the caller stopped waiting, then what
// each handler that did not merely give nothing did (the others are
// counted: a line that quotes the error stays short). When every handler
// gave nothing, it says what each looked for instead.
func (e *LoginError) Error() string {
	var b strings.Builder
	b.WriteString("vault: no usable credential")
	if e.Server != "" {
		fmt.Fprintf(&b, " for %s", e.Server)
	}
	sep := ": "
	if e.Cause != nil {
		var unauthorized *UnauthorizedError
		if errors.As(e.Cause, &unauthorized) {
			status := unauthorized.Status
			if status == "" {
				status = strconv.Itoa(unauthorized.StatusCode)
			}
			fmt.Fprintf(&b, ": the last one was rejected with %s", status)
		} else {
			fmt.Fprintf(&b, ": the last one was invalidated: %v", e.Cause)
		}
		sep = "; "
	}
	if e.Err != nil {
		fmt.Fprintf(&b, "%s%v", sep, e.Err)
		sep = "; "
	}
	var nothing []Outcome
	for _, o := range e.Handlers {
		if o.gaveNothing() {
			nothing = append(nothing, o)
			continue
		}
		b.WriteString(sep)
		b.WriteString(o.String())
		sep = "; "
	}
	switch n := len(nothing); {
	case n == len(e.Handlers) && n > 0:
		b.WriteString(sep + "nothing to log in with: ")
		for i, o := range nothing {
			if i > 0 {
				b.WriteString(", ")
			}
			if what := o.missing(); what != "" {
				b.WriteString(what)
			} else {
				fmt.Fprintf(&b, "handler %q gave nothing", o.Handler)
			}
		}
		if n > 1 {
			b.WriteString(" (provide one of them)")
		}
	case n == 1:
		b.WriteString(sep + "1 other handler gave nothing")
	case n > 1:
		fmt.Fprintf(&b, "%s%d other handlers gave nothing", sep, n)
	}
	// A handler's error may quote a URL with a password (a secret store's
	// address, from net/http or url.Parse).
	return redact.URL(b.String())
}

// Format prints the error's text for every verb: %+v and %#v would
// otherwise print the handlers' errors as they are.
func (e *LoginError) Format(f fmt.State, verb rune) { redact.Print(f, verb, e.Error()) }

// MarshalJSON encodes the error's text: encoding the fields would print
// the handlers' errors as they are.
func (e *LoginError) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"error": e.Error()})
}

// Unwrap returns the caller's context error, the last rejection's cause
// and every handler's error.
func (e *LoginError) Unwrap() []error {
	errs := make([]error, 0, len(e.Handlers)+2)
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	for _, o := range e.Handlers {
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
	}
	return errs
}

// retryAt is h's Outcome.RetryAt in a LoginError made at now: zero once
// it has passed, so that the error promises no login in the past.
func retryAt(h *handlerState, now time.Time) time.Time {
	if h.retryAt.After(now) {
		return h.retryAt
	}
	return time.Time{}
}
