package fleet

import (
	"os"
	"strings"
	"testing"
)

// The provider file of docs/fleet.md is one this package reads, with the
// role its EKS provider fixes and the policy that lets profiles add their
// cluster.
func TestREADMEProviderFile(t *testing.T) {
	const guide = "../docs/fleet.md"
	md, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, part := range strings.Split(string(md), "```json\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if ok && strings.Contains(block, `"providers"`) {
			found = append(found, block)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s has %d ```json provider files, want 1", guide, len(found))
	}
	providers, err := parseProviders([]byte(found[0]))
	if err != nil {
		t.Fatalf("%s's provider file: %v", guide, err)
	}
	if len(providers) != 2 || providers[0].Name != "eks" || providers[1].Name != "google" {
		t.Fatalf("%s's provider file has providers %+v, want eks and google", guide, providers)
	}
	if providers[0].ProfileSourcedCLIArgsPolicy != ArgsAppend {
		t.Errorf("the eks provider's profileSourcedCLIArgsPolicy = %q, want %q", providers[0].ProfileSourcedCLIArgsPolicy, ArgsAppend)
	}
}
