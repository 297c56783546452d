package modules

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// library is the root module's path: its packages outside internal/ are
// the public ones.
const library = "github.com/authvault/authvault"

// The top-level internal/ is the ground floor: helpers that every public
// package may stand on (pemdata, clockctx, absent, handlerconf) and tests
// of the repository. None of what the build compiles there imports a public
// package of the library, or a helper of a floor above (the kubeconfig
// mapping, which runs handlers' plugins, lives in handlers/internal/). A
// package's tests may import upward: an external test package is not part
// of the import graph.
func TestInternalIsTheGroundFloor(t *testing.T) {
	for _, up := range upwardImports(t, filepath.Join(root, "internal")) {
		t.Errorf("%s imports %s: the top-level internal/ may import only other packages of internal/ "+
			"(move the package under the public package that uses it, handlers/internal/…)", up.file, up.path)
	}
}

// The check finds an upward import when there is one.
func TestUpwardImportsFindsAPlantedOne(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ground", "ok.go"), "package ground\n\nimport _ \""+library+"/internal/pemdata\"\n")
	writeFile(t, filepath.Join(dir, "ground", "ok_test.go"), "package ground_test\n\nimport _ \""+library+"/login\"\n")
	writeFile(t, filepath.Join(dir, "mapping", "up.go"), "package mapping\n\nimport _ \""+library+"/handlers\"\n")
	got := upwardImports(t, dir)
	if len(got) != 1 || got[0].path != library+"/handlers" || filepath.Base(got[0].file) != "up.go" {
		t.Errorf("upwardImports = %+v, want the one of mapping/up.go", got)
	}
}

type upwardImport struct{ file, path string }

// upwardImports lists the imports, in dir's non-test Go files, of the
// library's packages outside its top-level internal/.
func upwardImports(t *testing.T, dir string) []upwardImport {
	t.Helper()
	var found []upwardImport
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && skipped(d.Name()) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if (p == library || strings.HasPrefix(p, library+"/")) && !strings.HasPrefix(p, library+"/internal/") {
				found = append(found, upwardImport{file: path, path: p})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
