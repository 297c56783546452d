package modules

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the repository, two levels up from this package.
const root = "../.."

// module is one go.mod of a tree: its directory and its path.
type module struct {
	dir, path string
}

// modulesUnder finds every go.mod under dir, outside testdata and
// directories whose name begins with "." or "_" (which go ./... skips too),
// and reads its module path with go mod edit.
func modulesUnder(t *testing.T, dir string) []module {
	t.Helper()
	var mods []module
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && skipped(d.Name()) {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		out, err := exec.Command("go", "mod", "edit", "-json", path).Output()
		if err != nil {
			return fmt.Errorf("go mod edit -json %s: %w", path, err)
		}
		var mf struct{ Module struct{ Path string } }
		if err := json.Unmarshal(out, &mf); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		mods = append(mods, module{dir: filepath.Dir(path), path: mf.Module.Path})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

func skipped(name string) bool {
	return name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// within returns the module of mods whose directory holds path (the
// deepest one), and false when none does.
func within(mods []module, path string) (module, bool) {
	var best module
	found := false
	for _, m := range mods {
		rel, err := filepath.Rel(m.dir, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		if !found || len(m.dir) > len(best.dir) {
			best, found = m, true
		}
	}
	return best, found
}

// owner returns the module of mods that an import path belongs to (the
// longest module path it starts with), and false when none.
func owner(mods []module, imp string) (module, bool) {
	var best module
	found := false
	for _, m := range mods {
		if (imp == m.path || strings.HasPrefix(imp, m.path+"/")) && (!found || len(m.path) > len(best.path)) {
			best, found = m, true
		}
	}
	return best, found
}

// internalPath tells whether imp names an internal package.
func internalPath(imp string) bool {
	return strings.Contains(imp, "/internal/") || strings.HasSuffix(imp, "/internal") || strings.HasPrefix(imp, "internal/")
}

// crossings lists, for the tree under dir, every import of a .go file
// (tests and files behind build constraints included) that names an
// internal package of a module other than the file's own, and the number
// of files read.
func crossings(t *testing.T, dir string, mods []module) (found []string, files int) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && skipped(d.Name()) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		from, ok := within(mods, path)
		if !ok {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil || !internalPath(imp) {
				continue
			}
			if to, ok := owner(mods, imp); ok && to.path != from.path {
				rel, _ := filepath.Rel(dir, path)
				found = append(found, fmt.Sprintf("%s (module %s) imports %s, an internal package of module %s",
					filepath.ToSlash(rel), from.path, imp, to.path))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, files
}

// No package of one module imports an internal package of another: a
// published cloud module must build against any later root release.
func TestNoModuleImportsAnothersInternalPackages(t *testing.T) {
	mods := modulesUnder(t, root)
	var paths []string
	for _, m := range mods {
		paths = append(paths, m.path)
	}
	for _, want := range []string{
		"github.com/authvault/authvault",
		"github.com/authvault/authvault/cloud/eks",
		"github.com/authvault/authvault/cloud/gke",
		"github.com/authvault/authvault/cloud/aks",
		"github.com/authvault/authvault/examples/rotation-demo",
	} {
		if !slices.Contains(paths, want) {
			t.Fatalf("found the modules %q, not %s", paths, want)
		}
	}
	found, files := crossings(t, root, mods)
	if files < 100 {
		t.Fatalf("read %d Go files, want the whole repository's", files)
	}
	for _, c := range found {
		t.Error(c)
	}
}

// The check finds an import of another module's internal package, in a
// test file too, and lets a module import its own.
func TestCrossingsFindsAnotherModulesInternalPackage(t *testing.T) {
	dir := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		path = filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/lib\n\ngo 1.26\n")
	write("internal/secret/secret.go", "package secret\n")
	write("lib.go", "package lib\n\nimport _ \"example.com/lib/internal/secret\"\n")
	write("sub/go.mod", "module example.com/lib/sub\n\ngo 1.26\n")
	write("sub/internal/own/own.go", "package own\n")
	write("sub/sub.go", "package sub\n\nimport _ \"example.com/lib/sub/internal/own\"\n")
	write("sub/sub_test.go", "package sub\n\nimport _ \"example.com/lib/internal/secret\"\n")
	write("sub/testdata/x.go", "package x\n\nimport _ \"example.com/lib/internal/secret\"\n")

	mods := modulesUnder(t, dir)
	if len(mods) != 2 {
		t.Fatalf("found modules %v, want example.com/lib and example.com/lib/sub", mods)
	}
	found, _ := crossings(t, dir, mods)
	want := []string{"sub/sub_test.go (module example.com/lib/sub) imports example.com/lib/internal/secret, an internal package of module example.com/lib"}
	if !slices.Equal(found, want) {
		t.Errorf("got %q, want %q", found, want)
	}
}
