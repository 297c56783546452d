// Package readme holds the test that keeps the README's Go honest: every
// ```go block in README.md must be a verbatim part of a Go file that the
// build compiles (an Example function, an examples/ program), so a snippet
// that no longer compiles fails make test instead of a new user.
package readme
