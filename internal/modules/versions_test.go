package modules

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// workspace is the file that puts the repository's modules in one
// workspace for make test's stages.
const workspace = "hack/all.work"

// toolModules build other projects' programs with those projects' own
// requirements (the envtest binaries, the peers' plugins, Flux's auth
// beside ours): they share no build with the rest and stay out of the
// workspace.
var toolModules = []string{"hack/envtest", "hack/peers", "hack/peers/flux"}

// builds maps each dependency module that provides a package to a module's
// packages or their tests to its version.
type builds map[string]string

// goList runs go list -deps -test over patterns in dir, with GOWORK set to
// work ("off" for the module alone), and reads "path version" lines. A
// replaced module's version is "version=>path@version": .Version alone is
// the required one, the same whatever code a replace puts in its place.
func goList(t *testing.T, dir, work string, patterns ...string) builds {
	t.Helper()
	args := append([]string{"list", "-deps", "-test",
		"-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{with .Replace}}=>{{.Path}}@{{.Version}}{{end}}{{end}}{{end}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+work, "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s (GOWORK=%s): %v\n%s", dir, work, err, stderr.String())
	}
	b := builds{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, version, ok := strings.Cut(sc.Text(), " "); ok {
			b[path] = version
		}
	}
	return b
}

// disagreements compares each module's builds with the root's and with the
// workspace's, and says, for each dependency built at two versions, which
// module builds which. Modules of the repository itself (the root as the
// others' replaced dependency) are left out: they are built from the tree.
func disagreements(root string, alone map[string]builds, work builds, ours []string) []string {
	var found []string
	names := make([]string, 0, len(alone))
	for name := range alone {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		deps := make([]string, 0, len(alone[name]))
		for dep := range alone[name] {
			if !slices.Contains(ours, dep) {
				deps = append(deps, dep)
			}
		}
		slices.Sort(deps)
		for _, dep := range deps {
			v := alone[name][dep]
			if name != root {
				if rv, ok := alone[root][dep]; ok && rv != v {
					found = append(found, fmt.Sprintf("module %s builds %s %s, the root module %s", name, dep, v, rv))
					continue
				}
			}
			if wv, ok := work[dep]; ok && wv != v {
				found = append(found, fmt.Sprintf("module %s builds %s %s alone, %s in the workspace (%s)", name, dep, v, wv, workspace))
			}
		}
	}
	return found
}

// Every module of the repository builds one version of each dependency,
// the root module's where the root builds it too, and the same alone as in
// the workspace: a package is compiled once for every module (by vet,
// staticcheck and the tests) only when everything under it is the same
// version in each, and the workspace's stages test what a module alone,
// as its users fetch it, builds.
func TestModulesBuildOneVersionOfEachDependency(t *testing.T) {
	mods := modulesUnder(t, root)
	var dirs, paths []string
	for _, m := range mods {
		rel, err := filepath.Rel(root, m.dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if !slices.Contains(toolModules, rel) {
			dirs = append(dirs, rel)
			paths = append(paths, m.path)
		}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(abs, workspace)

	// Every module but the tool modules is in the workspace, so that none
	// is left out of the stages that run over it.
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GOWORK="+work)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m with GOWORK=%s: %v", workspace, err)
	}
	var used []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, dir)
		if err != nil {
			t.Fatal(err)
		}
		used = append(used, filepath.ToSlash(rel))
	}
	slices.Sort(used)
	slices.Sort(dirs)
	if !slices.Equal(used, dirs) {
		t.Fatalf("%s uses %q; the repository's modules, less the tool modules %q, are %q", workspace, used, toolModules, dirs)
	}

	alone := map[string]builds{}
	var patterns []string
	for _, dir := range dirs {
		alone[dir] = goList(t, filepath.Join(abs, dir), "off", "./...")
		patterns = append(patterns, "./"+dir+"/...")
	}
	if len(alone["."]) < 50 {
		t.Fatalf("the root module builds %d dependency modules, want its whole graph", len(alone["."]))
	}
	inWork := goList(t, abs, work, patterns...)
	for _, d := range disagreements(".", alone, inWork, paths) {
		t.Error(d + ": run hack/align.sh (a newer version needed by another module's dependency is raised in the root's go.mod by hand)")
	}
}

// The comparison names the module and both versions, both against the
// root and against the workspace, and ignores the repository's own modules.
func TestDisagreementsNameModuleAndVersions(t *testing.T) {
	alone := map[string]builds{
		".":         {"k8s.io/utils": "v1", "example.com/a": "v1", "github.com/authvault/authvault/x": ""},
		"cloud/gke": {"k8s.io/utils": "v2", "example.com/b": "v1", "github.com/authvault/authvault": "v0.0.0"},
		"cloud/eks": {"k8s.io/utils": "v1", "example.com/b": "v1", "example.com/a": "v1=>example.com/a@v2"},
	}
	work := builds{"k8s.io/utils": "v1", "example.com/a": "v1", "example.com/b": "v3"}
	got := disagreements(".", alone, work, []string{"github.com/authvault/authvault", "github.com/authvault/authvault/x"})
	want := []string{
		"module cloud/eks builds example.com/a v1=>example.com/a@v2, the root module v1",
		"module cloud/eks builds example.com/b v1 alone, v3 in the workspace (hack/all.work)",
		"module cloud/gke builds example.com/b v1 alone, v3 in the workspace (hack/all.work)",
		"module cloud/gke builds k8s.io/utils v2, the root module v1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// goLine is the go directive of a go.mod or go.work file.
var goLine = regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)

// Every module of the workspace states the go version the workspace does:
// in workspace mode the language version and the GODEBUG defaults come
// from go.work's go line, alone from each module's, and the two runs must
// be the same code.
func TestWorkspaceGoLineIsEveryModules(t *testing.T) {
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := goLine.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s has no go line", path)
		}
		return string(m[1])
	}
	want := read(filepath.Join(root, workspace))
	for _, m := range modulesUnder(t, root) {
		rel, _ := filepath.Rel(root, m.dir)
		if slices.Contains(toolModules, filepath.ToSlash(rel)) {
			continue
		}
		if got := read(filepath.Join(m.dir, "go.mod")); got != want {
			t.Errorf("%s/go.mod says go %s, %s says go %s", rel, got, workspace, want)
		}
	}
}
