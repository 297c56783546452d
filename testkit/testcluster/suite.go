package testcluster

import (
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"go.uber.org/goleak"
)

// RunSuite runs a Ginkgo suite and fails t if a goroutine it started
// outlives it. Goroutines already there (klog's flush daemon) and Ginkgo's
// interrupt handler, which waits as long as the process lives, are not
// counted.
func RunSuite(t *testing.T, description string) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	before := goleak.IgnoreCurrent()
	ginkgo.RunSpecs(t, description)
	goleak.VerifyNone(t, before,
		goleak.IgnoreTopFunction("github.com/onsi/ginkgo/v2/internal/interrupt_handler.(*InterruptHandler).registerForInterrupts.func2"))
}
