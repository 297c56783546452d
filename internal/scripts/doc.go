// Package scripts holds the tests of the shell scripts of hack/ that make
// test itself runs on: hack/background.sh, which runs a stage in the
// background (the envtest and peer builds, compat's builds) and waits for
// it where its result is needed. A stage that fails there must fail make
// test; one stopped or killed must not fail the next, which must neither
// wait for it nor take it for its own. And hack/lock.sh, which the tool
// builds share: a build that waits for another says who holds the lock.
package scripts
