package flux_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/fluxcd/pkg/auth"
	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain runs the tests and benchmarks on one hub and member, started by
// the first that needs them (setup) and stopped here, then checks that no
// goroutine outlived them.
func TestMain(m *testing.M) {
	// Flux's controllers log through controller-runtime; nothing here
	// reads it.
	ctrllog.SetLogger(logr.Discard())
	// Flux serves serviceAccountName (object-level workload identity)
	// behind a feature gate; the cases compare it on. A case that turns it
	// off turns it back on.
	auth.EnableObjectLevelWorkloadIdentity()
	// The clouds' stand-ins, whose CA http.DefaultTransport trusts before
	// anything uses it; GKE's metadata server knows nothing.
	var err error
	if cloudNetwork, err = openCloudNet(cloudStandIn); err != nil {
		fmt.Fprintln(os.Stderr, "the clouds' stand-ins:", err)
		os.Exit(1)
	}
	if err := trustCloudCA(cloudNetwork.caPEM); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("GCE_METADATA_HOST", cloudNetwork.MetadataHost())
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the hub and member:", err)
		code = 1
	}
	cloudNetwork.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
