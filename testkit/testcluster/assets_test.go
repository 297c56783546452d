package testcluster

import (
	"strings"
	"testing"
)

// Without KUBEBUILDER_ASSETS, Start says what sets it from a user's own
// repository (setup-envtest, and the guide), not only from authvault's.
func TestStartWithoutAssetsSaysHowToGetThem(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	c, err := Start()
	if err == nil {
		_ = c.Stop()
		t.Fatal("Start without KUBEBUILDER_ASSETS started a cluster")
	}
	for _, want := range []string{"setup-envtest", "use -p path", "docs/testing.md", "hack/envtest.sh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}
