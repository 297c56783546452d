// Package readme holds the tests that keep the documents honest: every
// ```go block in README.md, CONTRIBUTING.md, SECURITY.md, CHANGELOG.md and
// the guides under docs/ must be a verbatim part of a Go file that the
// build compiles (an Example function, an examples/ program), so a snippet
// that no longer compiles fails make test instead of a new user; every
// relative link and anchor resolves; every make command names a target;
// the figures of make demo that the README and docs/benchmarks.md quote are
// those of docs/demo.json, the run docs/demo.svg draws, with its machine;
// and the README stays the front door: at most 300 lines, with a line for
// every guide.
package readme
