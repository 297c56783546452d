package fleet

import (
	"os"
	"strings"
	"testing"
)

// The README's provider file is one this package reads, with the role its
// EKS provider fixes and the policy that lets profiles add their cluster.
func TestREADMEProviderFile(t *testing.T) {
	md, err := os.ReadFile("../README.md")
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
		t.Fatalf("README.md has %d ```json provider files, want 1", len(found))
	}
	providers, err := parseProviders([]byte(found[0]))
	if err != nil {
		t.Fatalf("README.md's provider file: %v", err)
	}
	if len(providers) != 2 || providers[0].Name != "eks" || providers[1].Name != "google" {
		t.Fatalf("README.md's provider file has providers %+v, want eks and google", providers)
	}
	if providers[0].ProfileSourcedCLIArgsPolicy != ArgsAppend {
		t.Errorf("the eks provider's profileSourcedCLIArgsPolicy = %q, want %q", providers[0].ProfileSourcedCLIArgsPolicy, ArgsAppend)
	}
}
