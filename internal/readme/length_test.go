package readme

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxREADMELines is the README's budget, in lines as wc -l counts them.
const maxREADMELines = 300

// The README is the front door: what authvault is, install and the
// supported versions, make cluster and the quickstart, the figures, and one
// line per guide. Everything else has a guide under docs/.
func TestREADMEIsShort(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(md, []byte("\n")); n > maxREADMELines {
		t.Errorf("README.md has %d lines, more than %d: it holds what authvault is, install and versions, make cluster and the quickstart, "+
			"a short table of the figures and one line per guide; move the rest into the guide of its topic under docs/ "+
			"(vault.md, fleet.md, cloud.md, addonauth.md, operations.md, guarantees.md, compatibility.md, benchmarks.md) and link it from there",
			n, maxREADMELines)
	}
}

// Every guide under docs/ has its line in the README, so that a reader
// who starts there finds it.
func TestREADMELinksEveryGuide(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(string(md), -1) {
		file, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Clean(file)] = true
	}
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) == 0 {
		t.Fatal("no guide under docs/: has the directory moved?")
	}
	for _, path := range guides {
		name := filepath.ToSlash(filepath.Join("docs", filepath.Base(path)))
		if !linked[filepath.Clean(name)] {
			t.Errorf("README.md does not link %s: give it its line under Guides", name)
		}
	}
}
