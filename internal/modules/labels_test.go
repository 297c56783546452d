package modules

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// longLabel finds a Ginkgo Label(...) call that names "long".
var longLabel = regexp.MustCompile(`Label\([^)]*"(?i:long)"`)

// make test runs the "long" specs in a go test of ./integration alone
// (the Makefile's LONG) with AUTHVAULT_LABEL_FILTER=long, and every other
// suite with !long: a "long" spec anywhere else would run in neither.
func TestLongLabelOnlyInTheSplitSuite(t *testing.T) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipped(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(path) != ".go" || filepath.Dir(path) == filepath.Join(root, "integration") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if longLabel.Match(b) {
			t.Errorf("%s labels a spec \"long\": only ./integration's long specs run in make test (LONG in the Makefile)", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
