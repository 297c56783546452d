package testcluster

import (
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"go.uber.org/goleak"

	"github.com/authvault/authvault/testkit/testwait"
)

// labelFilterEnv names the environment variable whose value, a Ginkgo
// label filter, picks the specs RunSuite runs when -ginkgo.label-filter
// does not: make test runs the integration suite's long specs (Label
// "long") and the others in two processes at once, by setting it, where a
// flag would reach every package's test binary.
const labelFilterEnv = "AUTHVAULT_LABEL_FILTER"

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
	suite, reporter := ginkgo.GinkgoConfiguration()
	if filter := os.Getenv(labelFilterEnv); filter != "" && suite.LabelFilter == "" {
		suite.LabelFilter = filter
	}
	before := goleak.IgnoreCurrent()
	ginkgo.RunSpecs(t, description, suite, reporter)
	goleak.VerifyNone(t, before,
		goleak.IgnoreTopFunction("github.com/onsi/ginkgo/v2/internal/interrupt_handler.(*InterruptHandler).registerForInterrupts.func2"))
}
