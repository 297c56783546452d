package testcluster

import (
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"go.uber.org/goleak"

	"github.com/authvault/authvault/testkit/testwait"
)

// RunSuite runs a Ginkgo suite and fails t if a goroutine it started
// outlives it. Goroutines already there (klog's flush daemon) and Ginkgo's
// interrupt handler, which waits as long as the process lives, are not
// counted.
func RunSuite(t *testing.T, description string) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	// Gomega's default, a second, is a busy machine's speed: what a spec
	// waits for with Eventually and no timeout of its own may take a hang's
	// worth of time. Consistently keeps its short default: it asserts that
	// something does not happen, which a slow machine cannot turn red.
	gomega.SetDefaultEventuallyTimeout(testwait.Hang)
	before := goleak.IgnoreCurrent()
	ginkgo.RunSpecs(t, description)
	goleak.VerifyNone(t, before,
		goleak.IgnoreTopFunction("github.com/onsi/ginkgo/v2/internal/interrupt_handler.(*InterruptHandler).registerForInterrupts.func2"))
}
