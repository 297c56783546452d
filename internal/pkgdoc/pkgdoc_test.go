package pkgdoc

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the repository, two levels up from this package.
const root = "../.."

// published are the packages a user imports, the cloud modules' too.
var published = []string{"login", "login/loginhttp", "redact", "vault", "handlers", "piggyback", "fleet", "addonauth", "cloud/eks", "cloud/gke", "cloud/aks"}

// load parses dir's non-test files and returns its doc, as go doc and
// pkg.go.dev make it (unexported fields and methods left out), with the
// import paths its files name by each local name.
func load(t *testing.T, dir string) (*doc.Package, map[string]string) {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	imports := map[string]string{}
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != filepath.Join(root, dir) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = p
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/authvault/authvault/"+dir)
	if err != nil {
		t.Fatal(err)
	}
	return pkg, imports
}

// A package doc opens with what the package is for, then code, before its
// first heading.
func TestPackageDocOpensWithPurposeAndCode(t *testing.T) {
	for _, dir := range published {
		pkg, _ := load(t, dir)
		blocks := pkg.Parser().Parse(pkg.Doc).Content
		if len(blocks) == 0 {
			t.Errorf("%s: no package doc", dir)
			continue
		}
		if p, ok := blocks[0].(*comment.Paragraph); !ok || !strings.HasPrefix(text(p.Text), "Package "+pkg.Name+" ") {
			t.Errorf("%s: the package doc does not open with \"Package %s …\"", dir, pkg.Name)
		}
		code := false
		for _, b := range blocks {
			if _, ok := b.(*comment.Heading); ok {
				break
			}
			if _, ok := b.(*comment.Code); ok {
				code = true
				break
			}
		}
		if !code {
			t.Errorf("%s: no code in the package doc before its first heading", dir)
		}
	}
}

// internalWords are what a user of the package cannot see or use: a source
// or test file, a test, an internal package.
var internalWords = regexp.MustCompile(`\b[\w-]+\.go\b|\bTest[A-Z]\w*|\binternal/|\bhandlerconf\b`)

// Exported docs name no source file, test or internal package.
func TestExportedDocsNameNothingInternal(t *testing.T) {
	for _, dir := range published {
		pkg, _ := load(t, dir)
		for where, d := range exportedDocs(pkg) {
			if m := internalWords.FindString(d); m != "" {
				t.Errorf("%s: the doc of %s names %q", dir, where, m)
			}
		}
	}
}

// historyWords say how an API was, not how it is: what changed belongs
// in CHANGELOG.md, under the release that changed it.
var historyWords = regexp.MustCompile(`(?i)\b(?:when upgrading|used to (?:be|take|return|call|log|read|give|accept|run)|formerly|previously|as one had to|was renamed|renamed from|in (?:earlier|older|previous) (?:releases?|versions?)|before this release)\b`)

// history returns where pkg's exported docs speak of an older API, and
// the words that do.
func history(pkg *doc.Package) map[string]string {
	found := map[string]string{}
	for where, d := range exportedDocs(pkg) {
		if m := historyWords.FindString(d); m != "" {
			found[where] = m
		}
	}
	return found
}

// Exported docs say what is; CHANGELOG.md says what changed.
func TestExportedDocsSayWhatIsNotWhatWas(t *testing.T) {
	for _, dir := range published {
		pkg, _ := load(t, dir)
		for where, m := range history(pkg) {
			t.Errorf("%s: the doc of %s speaks of an older API (%q): say what is, and put what changed in CHANGELOG.md", dir, where, m)
		}
	}
}

// The check finds the notes planted in testdata/history, in a field's doc
// and a function's.
func TestHistoryCheckFindsPlantedNotes(t *testing.T) {
	pkg, _ := load(t, "internal/pkgdoc/testdata/history")
	found := history(pkg)
	if found["Options.OnAdd"] != "when upgrading" || found["Do"] != "used to return" {
		t.Errorf("the planted notes found: %v, want Options.OnAdd's \"when upgrading\" and Do's \"used to return\"", found)
	}
}

// Exported declarations show no type or value of an internal package.
func TestExportedDeclarationsShowNoInternalPackage(t *testing.T) {
	for _, dir := range published {
		pkg, imports := load(t, dir)
		for where, decl := range exportedDecls(pkg) {
			ast.Inspect(decl, func(n ast.Node) bool {
				if _, ok := n.(*ast.BlockStmt); ok {
					return false // a function's body is not shown
				}
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && strings.Contains(imports[x.Name]+"/", "/internal/") {
					t.Errorf("%s: %s shows %s.%s, of %s", dir, where, x.Name, sel.Sel.Name, imports[x.Name])
				}
				return true
			})
		}
	}
}

// No exported variable is a slice or a map: every importer could change it.
func TestNoExportedSliceOrMapVariable(t *testing.T) {
	for _, dir := range published {
		pkg, _ := load(t, dir)
		for _, v := range pkg.Vars {
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !name.IsExported() || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.CompositeLit); ok {
						switch lit.Type.(type) {
						case *ast.ArrayType, *ast.MapType:
							t.Errorf("%s: %s is a slice or map variable", dir, name.Name)
						}
					}
				}
			}
		}
	}
}

// exportedDocs are the docs go doc -all shows, by what they document.
func exportedDocs(pkg *doc.Package) map[string]string {
	docs := map[string]string{"the package": pkg.Doc}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			docs[strings.Join(v.Names, ", ")] = v.Doc
			for _, spec := range v.Decl.Specs {
				s := spec.(*ast.ValueSpec)
				docs[s.Names[0].Name+" (its line)"] = s.Doc.Text() + s.Comment.Text()
			}
		}
	}
	funcs := func(prefix string, fs []*doc.Func) {
		for _, f := range fs {
			docs[prefix+f.Name] = f.Doc
		}
	}
	values(pkg.Consts)
	values(pkg.Vars)
	funcs("", pkg.Funcs)
	for _, typ := range pkg.Types {
		docs[typ.Name] = typ.Doc
		values(typ.Consts)
		values(typ.Vars)
		funcs("", typ.Funcs)
		funcs(typ.Name+".", typ.Methods)
		for _, spec := range typ.Decl.Specs {
			ts := spec.(*ast.TypeSpec)
			ast.Inspect(ts.Type, func(n ast.Node) bool {
				if f, ok := n.(*ast.Field); ok && len(f.Names) > 0 {
					docs[typ.Name+"."+f.Names[0].Name] = f.Doc.Text() + f.Comment.Text()
				}
				return true
			})
		}
	}
	return docs
}

// exportedDecls are the declarations go doc -all shows, by name.
func exportedDecls(pkg *doc.Package) map[string]ast.Node {
	decls := map[string]ast.Node{}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			decls[strings.Join(v.Names, ", ")] = v.Decl
		}
	}
	funcs := func(prefix string, fs []*doc.Func) {
		for _, f := range fs {
			decls[prefix+f.Name] = f.Decl.Type
		}
	}
	values(pkg.Consts)
	values(pkg.Vars)
	funcs("", pkg.Funcs)
	for _, typ := range pkg.Types {
		decls[typ.Name] = typ.Decl
		values(typ.Consts)
		values(typ.Vars)
		funcs("", typ.Funcs)
		funcs(typ.Name+".", typ.Methods)
	}
	return decls
}

// text is a paragraph's plain text.
func text(parts []comment.Text) string {
	var b strings.Builder
	for _, p := range parts {
		switch p := p.(type) {
		case comment.Plain:
			b.WriteString(string(p))
		case comment.Italic:
			b.WriteString(string(p))
		case *comment.Link:
			b.WriteString(text(p.Text))
		case *comment.DocLink:
			b.WriteString(text(p.Text))
		}
	}
	return b.String()
}
