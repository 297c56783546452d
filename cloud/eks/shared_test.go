package eks

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// The configurations a Native shares are one per region and profile, and
// no more than maxSharedConfigs however many regions Secrets name; past
// that, a login still gets its own.
func TestSharedConfigsAreBounded(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "no-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	var s sharedConfigs
	first, _, err := s.load(context.Background(), "eu-west-1", "")
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := s.load(context.Background(), "eu-west-1", "")
	if err != nil || again != first {
		t.Errorf("the same region loaded again: %p, %p, %v", again, first, err)
	}
	for i := range maxSharedConfigs + 2 {
		region := fmt.Sprintf("xx-test-%d", i)
		cfg, _, err := s.load(context.Background(), region, "")
		if err != nil || cfg.Region != region {
			t.Fatalf("region %s: %v, %v", region, cfg, err)
		}
	}
	if n := s.size(); n != maxSharedConfigs {
		t.Errorf("%d configurations kept, want %d", n, maxSharedConfigs)
	}
}
