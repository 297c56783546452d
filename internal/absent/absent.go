// Package absent lets a built-in login handler say what it looked for when
// it has nothing to offer, for the project's packages only: a vault whose
// handlers all have nothing can then say what is missing ("no in-cluster
// service account, no --kubeconfig") instead of only that nothing came.
//
// A handler returns the error of New where it would return (nil, nil); the
// vault takes it as "nothing from me", as it takes (nil, nil), and keeps
// its words for its LoginError. Wrapping it (fmt.Errorf with %w) keeps it
// so; an error that wraps it must mean nothing more than it does.
package absent

import "errors"

// Error is a handler's "nothing from me", with what it looked for.
type Error struct {
	// What is missing, as a phrase that reads in a list: "no in-cluster
	// service account", "no file of $KUBECONFIG exists (/a/config)".
	What string
}

func (e *Error) Error() string { return e.What }

// New returns the "nothing from me" of a handler that looked for what.
func New(what string) error { return &Error{What: what} }

// What is what err says is missing, and whether err is such an error.
func What(err error) (string, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.What, true
	}
	return "", false
}
