package readme

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the repository, two levels up from this package.
const root = "../.."

// block is a ```go block of a Markdown file.
type block struct {
	line  int      // where its first line of code is, 1-based
	lines []string // its code, each line trimmed of leading white space
}

// goBlocks returns the ```go blocks of md.
func goBlocks(md []byte) ([]block, error) {
	var blocks []block
	var cur *block
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		fence := strings.TrimSpace(text)
		switch {
		case cur == nil && fence == "```go":
			cur = &block{line: n + 1}
		case cur != nil && fence == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, strings.TrimSpace(text))
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("the ```go block at line %d is never closed", cur.line)
	}
	return blocks, sc.Err()
}

// compiledGoFiles are the .go files under dir that go build and go vet
// compile: not under testdata, nor a directory whose name begins with "."
// or "_", nor behind a build constraint.
func compiledGoFiles(dir string) (map[string][]string, error) {
	files := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte("//go:build")) {
			return nil
		}
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			lines = append(lines, strings.TrimSpace(l))
		}
		files[path] = lines
		return nil
	})
	return files, err
}

// contains tells whether want is a run of consecutive lines of have.
func contains(have, want []string) bool {
	for i := 0; i+len(want) <= len(have); i++ {
		match := true
		for j, w := range want {
			if have[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// Every ```go block of the README, of the other documents at the top
// (CONTRIBUTING.md, SECURITY.md, CHANGELOG.md) and of those under docs/, is
// part of a compiled Go file, line for line (indentation aside).
// Before, the README's "Login handlers" block passed a pointer where a value
// goes (handlers.ExecConfig{ExecConfig: kubeconfigUser.Exec}) and nothing
// noticed.
func TestEveryREADMEGoBlockIsCompiledCode(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := compiledGoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append(topDocuments(), docs...) {
		name, _ := filepath.Rel(root, path)
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := goBlocks(md)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "README.md" && len(blocks) == 0 {
			t.Fatal("README.md has no ```go block: has the file moved?")
		}
		for _, b := range blocks {
			found := ""
			for path, lines := range files {
				if contains(lines, b.lines) {
					found = path
					break
				}
			}
			if found == "" {
				t.Errorf("%s:%d: this ```go block is in no compiled Go file; put it, line for line, in an Example function or a program under examples/ (its first line: %q)",
					name, b.line, b.lines[0])
			} else {
				t.Logf("%s:%d: in %s", name, b.line, found)
			}
		}
	}
}

// The check itself: a block that differs from the code by one token, or
// whose lines are not consecutive there, is not found; indentation does not
// matter.
func TestContains(t *testing.T) {
	code := []string{"func f() {", "a := 1", "b := a", "}"}
	for _, c := range []struct {
		want []string
		ok   bool
	}{
		{[]string{"a := 1", "b := a"}, true},
		{[]string{"a := 2", "b := a"}, false},
		{[]string{"func f() {", "b := a"}, false},
		{[]string{"}"}, true},
	} {
		if got := contains(code, c.want); got != c.ok {
			t.Errorf("contains(%q) = %v, want %v", c.want, got, c.ok)
		}
	}
	blocks, err := goBlocks([]byte("text\n```go\n\tx := 1\n```\n```sh\nls\n```\n"))
	if err != nil || len(blocks) != 1 || blocks[0].line != 3 || blocks[0].lines[0] != "x := 1" {
		t.Errorf("goBlocks() = %+v, %v", blocks, err)
	}
	if _, err := goBlocks([]byte("```go\nx := 1\n")); err == nil {
		t.Error("goBlocks() of an unclosed block: no error")
	}
}

// anchor is the fragment GitHub gives a heading: lower case, spaces as
// hyphens, punctuation other than hyphens and underscores dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdLink is a Markdown link's target: ](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link of the documents at the top and of docs/ leads somewhere: a file of
// the repository, and a #fragment to a heading of the file it names. The
// README's table of contents is made of such links.
func TestDocumentLinksResolve(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := func(path string) (map[string]bool, error) {
		md, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		found := map[string]bool{}
		for _, line := range strings.Split(string(md), "\n") {
			if h := strings.TrimLeft(line, "#"); h != line && strings.HasPrefix(h, " ") {
				found[anchor(strings.TrimSpace(h))] = true
			}
		}
		return found, nil
	}
	links := 0
	for _, path := range append(topDocuments(), docs...) {
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(md), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, frag, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: %v", path, target, err)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			hs, err := headings(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !hs[frag] {
				t.Errorf("%s: link %q: %s has no heading with that anchor", path, target, dest)
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative link found: has the README moved?")
	}
}

func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"An operator's main": "an-operators-main",
		"Cloud clusters without exec plugins: EKS, GKE, AKS": "cloud-clusters-without-exec-plugins-eks-gke-aks",
		"Clusters from ClusterProfiles (SIG-Multicluster)":   "clusters-from-clusterprofiles-sig-multicluster",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// topDocuments are the Markdown files at the repository's top that a user
// or a contributor reads, the README first.
func topDocuments() []string {
	var paths []string
	for _, name := range []string{"README.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md"} {
		paths = append(paths, filepath.Join(root, name))
	}
	return paths
}
