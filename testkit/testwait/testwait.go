// Package testwait is how long a test waits for what it expects to happen:
// long enough that only a hang, never a slow or busy machine, runs past it.
// A test that waits returns as soon as the event happens, so the bound
// costs nothing when all is well; what measures speed is a benchmark's
// business, not a test's.
package testwait

import (
	"context"
	"testing"
	"time"
)

// Hang is the longest a test waits for something that is to happen before
// it calls it a hang: thirty seconds. What takes milliseconds on an idle
// machine may take seconds under -race beside two busy loops on two cores
// (make test-loaded); what has not come in thirty is not coming. Use it
// for polls, for the deadlines of calls that are to succeed, and for a
// wait on a channel.
const Hang = 30 * time.Second

// For polls cond every few milliseconds until it holds, and fails the test
// (t.Fatalf, naming what) if it does not within Hang. Call it from the
// test's goroutine.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Hang, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Context is a context that ends after Hang, or when the test ends: for the
// calls of a test that are to succeed.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Hang)
	t.Cleanup(cancel)
	return ctx
}
