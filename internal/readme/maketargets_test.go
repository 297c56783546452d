package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// makeCommand is a make command in a line of code: make, its flags (-C,
// -f and -I with their argument) and variable settings, then the first
// target.
var makeCommand = regexp.MustCompile(`(?:^|[\s;&|(])make((?:\s+(?:-[CfI]\s*\S+|-\S+|[A-Z_][A-Z0-9_]*=\S*))*)\s+([a-z][a-z0-9_-]*)`)

// makeTarget is a rule's line in the Makefile.
var makeTarget = regexp.MustCompile(`(?m)^([a-z][a-z0-9_-]*)\s*:`)

// codeOf is the code of a Markdown text: its inline code spans and the
// lines of its fenced blocks.
func codeOf(md string) []string {
	var code []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			code = append(code, line)
			continue
		}
		spans := strings.Split(line, "`")
		for i := 1; i < len(spans); i += 2 {
			code = append(code, spans[i])
		}
	}
	return code
}

// Every make command the documents give (README, CONTRIBUTING, SECURITY,
// CHANGELOG, docs/) names a target of the Makefile: a contributor who
// types it gets what the text says, not "No rule to make target".
// Before, CONTRIBUTING.md told contributors to run make test-loaded, which
// did not exist.
func TestDocumentedMakeTargetsExist(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(string(makefile), -1) {
		targets[m[1]] = true
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	commands := 0
	for _, path := range append(topDocuments(), docs...) {
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, path)
		for _, code := range codeOf(string(md)) {
			for _, m := range makeCommand.FindAllStringSubmatch(code, -1) {
				commands++
				if !targets[m[2]] {
					t.Errorf("%s: %q runs make %s, which the Makefile has no target for", name, strings.TrimSpace(code), m[2])
				}
			}
		}
	}
	if commands < 10 {
		t.Errorf("found %d make commands in the documents: the test reads them wrong", commands)
	}
}

func TestMakeCommand(t *testing.T) {
	for _, tc := range []struct{ code, want string }{
		{"make test", "test"},
		{"make release VERSION=v0.2.0   # the release commit", "release"},
		{"make -C x FUZZTIME=5m fuzz", "fuzz"},
		{"cd x && make demo", "demo"},
		{"go build; make cluster-revoke", "cluster-revoke"},
		{"remake test", ""},
		{"make", ""},
	} {
		got := ""
		if m := makeCommand.FindStringSubmatch(tc.code); m != nil {
			got = m[2]
		}
		if got != tc.want {
			t.Errorf("the target of %q: %q, want %q", tc.code, got, tc.want)
		}
	}
}
