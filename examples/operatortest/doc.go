// Package operatortest is the example of docs/testing.md: a test of an
// operator's own, written as a user writes one, that revokes the token its
// vault serves in the middle of a run of requests and asserts that no
// caller saw an error. It has nothing to import: read rotation_test.go.
package operatortest
