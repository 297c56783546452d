package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// releaseTimeout bounds a hang of one release, gorelease included; a
// release on an idle machine takes seconds.
const releaseTimeout = 10 * time.Minute

// gitEnv keeps the user's git configuration (a signing key, hooks) out of
// the tests' repositories and gives their commits an author.
func gitEnv(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, k := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(k, "release test")
	}
	for _, k := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(k, "release-test@example.com")
	}
}

// fixture is a repository laid out as authvault is, small: a root module
// with one function and a nested module under cloud/ that calls it and
// replaces it by the working tree.
type fixture struct {
	t   *testing.T
	dir string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	gitEnv(t)
	f := &fixture{t: t, dir: t.TempDir()}
	f.write("go.mod", "module example.com/fix\n\ngo 1.26\n")
	f.write("fix.go", "// Package fix is a release test's module.\npackage fix\n\n// Hello greets.\nfunc Hello() string { return \"hello\" }\n")
	f.write("cloud/x/go.mod", "module example.com/fix/cloud/x\n\ngo 1.26\n\nrequire example.com/fix v0.0.0\n\nreplace example.com/fix => ../..\n")
	f.write("cloud/x/x.go", "// Package x is a release test's nested module.\npackage x\n\nimport \"example.com/fix\"\n\n// Greeting is fix's.\nfunc Greeting() string { return fix.Hello() }\n")
	f.write("CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-11-28\n\n### Changed\n\n- Bye.\n\n## [0.1.1] - 2026-11-28\n\n### Fixed\n\n- Nothing.\n\n## [0.1.0] - 2026-11-27\n\n### Added\n\n- Hello.\n\n## [0.0.9] - 27 Nov 2026\n\n- A date written otherwise.\n\n## [0.0.8] - 2026-11-26\n\n")
	f.git("init", "--quiet", "--initial-branch=main")
	f.commit("the fixture")
	return f
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	out, err := git(context.Background(), f.dir, args...)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) commit(msg string) {
	f.t.Helper()
	f.git("add", "--all")
	f.git("commit", "--quiet", "--message", msg)
}

// state is what a refused release must leave as it was.
func (f *fixture) state() string {
	return f.git("rev-parse", "HEAD") + "\n" + f.git("tag", "--list") + "\n" + f.git("status", "--porcelain") + "\n" + f.git("branch", "--show-current")
}

func (f *fixture) release(version string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var out strings.Builder
	err := release(ctx, f.dir, version, &out)
	return out.String(), err
}

func TestReleaseRefusesAndChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		setup         func(f *fixture)
		want          string
	}{
		{"no v", "0.1.0", nil, `not a semantic version`},
		{"two numbers", "v0.1", nil, `not a semantic version`},
		{"build metadata", "v0.1.0+build.1", nil, `not a semantic version`},
		{"leading zero", "v01.0.0", nil, `not a semantic version`},
		{"a query", "latest", nil, `not a semantic version`},
		{"empty", "", nil, `VERSION "" is not a semantic version`},
		{"a flag", "--help", nil, `not a semantic version`},
		{"a changed file", "v0.1.0", func(f *fixture) { f.write("fix.go", "package fix\n") }, `changes not committed (fix.go`},
		{"a new file", "v0.1.0", func(f *fixture) { f.write("new.go", "package fix\n") }, `changes not committed (new.go`},
		{"a staged file", "v0.1.0", func(f *fixture) { f.write("new.go", "package fix\n"); f.git("add", "new.go") }, `changes not committed (new.go`},
		{"another branch", "v0.1.0", func(f *fixture) { f.git("checkout", "--quiet", "-b", "topic") }, `HEAD is topic: releases are made from main`},
		{"a detached HEAD", "v0.1.0", func(f *fixture) { f.git("checkout", "--quiet", "--detach") }, `HEAD is HEAD: releases are made from main`},
		{"the root tagged", "v0.1.0", func(f *fixture) { f.git("tag", "v0.1.0") }, `v0.1.0 is tagged already`},
		{"a nested module tagged", "v0.1.0", func(f *fixture) { f.git("tag", "cloud/x/v0.1.0") }, `cloud/x/v0.1.0 is tagged already`},
		{"older than the newest", "v0.1.0", func(f *fixture) { f.git("tag", "v0.2.0") }, `v0.1.0 is older than the newest release, v0.2.0`},
		{"older than a nested module's newest", "v0.1.0", func(f *fixture) { f.git("tag", "cloud/x/v0.2.0") }, `v0.1.0 is older than the newest release, cloud/x/v0.2.0`},
		{"older than a pre-release", "v0.1.0", func(f *fixture) { f.git("tag", "v0.2.0-rc.1") }, `v0.1.0 is older than the newest release, v0.2.0-rc.1`},
		{"no section", "v0.3.0", nil, `CHANGELOG.md has no section for v0.3.0: add "## [0.3.0] - YYYY-MM-DD"`},
		{"unreleased only", "v0.1.0", func(f *fixture) {
			f.write("CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n\n- Hello.\n")
			f.commit("unreleased")
		}, `no section for v0.1.0`},
		{"a section of another pre-release", "v0.1.0-rc.1", nil, `no section for v0.1.0-rc.1`},
		{"a date written otherwise", "v0.0.9", nil, `the section of v0.0.9 is dated "27 Nov 2026", not YYYY-MM-DD`},
		{"an empty section", "v0.0.8", nil, `the section of v0.0.8 says nothing`},
		{"no changelog", "v0.1.0", func(f *fixture) { f.git("rm", "--quiet", "CHANGELOG.md"); f.commit("no changelog") }, `every release has a section in CHANGELOG.md`},
		{"a changelog that is a directory", "v0.1.0", func(f *fixture) {
			f.git("rm", "--quiet", "CHANGELOG.md")
			f.write("CHANGELOG.md/README", "no\n")
			f.commit("a directory")
		}, `every release has a section in CHANGELOG.md`},
		{"a section in a code block", "v0.3.0", func(f *fixture) {
			f.write("CHANGELOG.md", "# Changelog\n\nA section looks like this:\n\n```markdown\n## [0.3.0] - 2026-11-27\n\n- What changed.\n```\n")
			f.commit("an example")
		}, `no section for v0.3.0`},
		{"a section in a tilde code block", "v0.3.0", func(f *fixture) {
			f.write("CHANGELOG.md", "# Changelog\n\n~~~~\n## [0.3.0] - 2026-11-27\n\n- What changed.\n```\n~~~\n~~~~\n")
			f.commit("an example")
		}, `no section for v0.3.0`},
		{"a section in an HTML comment", "v0.3.0", func(f *fixture) {
			f.write("CHANGELOG.md", "# Changelog\n\n<!-- the next release:\n## [0.3.0] - 2026-11-27\n\n- Planned.\n-->\n")
			f.commit("a plan")
		}, `no section for v0.3.0`},
		{"a section that holds only a comment", "v0.3.0", func(f *fixture) {
			f.write("CHANGELOG.md", "# Changelog\n\n## [0.3.0] - 2026-11-27\n\n<!-- to do -->\n\n## [0.2.0] - 2026-11-26\n\n- Bye.\n")
			f.commit("a section to do")
		}, `the section of v0.3.0 says nothing`},
		{"a changelog that is a symbolic link", "v0.1.0", func(f *fixture) {
			f.git("mv", "CHANGELOG.md", "NOTES.md")
			if err := os.Symlink("NOTES.md", filepath.Join(f.dir, "CHANGELOG.md")); err != nil {
				t.Fatal(err)
			}
			f.commit("a link")
		}, `CHANGELOG.md is a symbolic link`},
		{"a nested module that replaces one version of the root", "v0.1.0", func(f *fixture) {
			f.write("cloud/x/go.mod", "module example.com/fix/cloud/x\n\ngo 1.26\n\nrequire example.com/fix v0.0.0\n\nreplace example.com/fix v0.0.0 => ../..\n")
			f.commit("a versioned replace")
		}, `cloud/x/go.mod does not replace example.com/fix by the working tree (replace example.com/fix => ../..)`},
		{"a nested module that does not replace the root", "v0.1.0", func(f *fixture) {
			f.write("cloud/x/go.mod", "module example.com/fix/cloud/x\n\ngo 1.26\n\nrequire example.com/fix v0.0.0\n")
			f.commit("no replace")
		}, `cloud/x/go.mod does not replace example.com/fix by the working tree`},
		{"a nested module that replaces the root by another tree", "v0.1.0", func(f *fixture) {
			f.write("cloud/x/go.mod", "module example.com/fix/cloud/x\n\ngo 1.26\n\nrequire example.com/fix v0.0.0\n\nreplace example.com/fix => ../../../fork\n")
			f.commit("a fork")
		}, `cloud/x/go.mod does not replace example.com/fix by the working tree`},
		{"a nested module in a directory with a space", "v0.1.0", func(f *fixture) {
			f.write("cloud/y z/go.mod", "module example.com/fix/cloud/yz\n\ngo 1.26\n")
			f.commit("a space")
		}, `a nested module's path must be the root's path and its directory, example.com/fix/cloud/y z`},
		{"a nested module of another path", "v0.1.0", func(f *fixture) {
			f.write("cloud/x/go.mod", "module example.com/other\n\ngo 1.26\n")
			f.commit("moved")
		}, `declares module example.com/other: a nested module's path must be the root's path and its directory, example.com/fix/cloud/x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			before := f.state()
			out, err := f.release(tc.version)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("release(%q) = %v (printed %q), want an error with %q", tc.version, err, out, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the refusal is more than one line: %q", err)
			}
			if after := f.state(); after != before {
				t.Errorf("a refused release changed the repository:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

func TestReleaseTagsEveryModuleAndRefusesAnAPIBreakInAPatch(t *testing.T) {
	f := newFixture(t)
	out, err := f.release("v0.1.0")
	if err != nil {
		t.Fatalf("the first release: %v", err)
	}
	// --atomic: a push whose main is refused (main moved on meanwhile)
	// pushes no tag either, so no tag points outside main.
	if !strings.Contains(out, "v0.1.0 is the first release") || !strings.Contains(out, "git push --atomic origin main v0.1.0 cloud/x/v0.1.0") {
		t.Errorf("the first release printed %q", out)
	}
	if got := f.git("tag", "--list"); got != "cloud/x/v0.1.0\nv0.1.0" {
		t.Errorf("tags after the first release: %q", got)
	}
	if got := f.git("log", "-1", "--format=%s"); got != "Release v0.1.0" {
		t.Errorf("the release commit is %q", got)
	}
	if got := f.git("rev-parse", "v0.1.0^{commit}"); got != f.git("rev-parse", "HEAD") || got != f.git("rev-parse", "cloud/x/v0.1.0^{commit}") {
		t.Errorf("the tags are not on the release commit")
	}
	gomod := f.git("show", "cloud/x/v0.1.0:cloud/x/go.mod")
	if !strings.Contains(gomod, "require example.com/fix v0.1.0") || !strings.Contains(gomod, "replace example.com/fix => ../..") {
		t.Errorf("the nested module's go.mod at its tag:\n%s", gomod)
	}

	// Hello goes, Bye comes: an incompatible change, which a patch may not
	// carry.
	f.write("fix.go", "// Package fix is a release test's module.\npackage fix\n\n// Bye parts.\nfunc Bye() string { return \"bye\" }\n")
	f.write("cloud/x/x.go", "// Package x is a release test's nested module.\npackage x\n\nimport \"example.com/fix\"\n\n// Greeting is fix's.\nfunc Greeting() string { return fix.Bye() }\n")
	f.commit("bye")
	before := f.state()
	_, err = f.release("v0.1.1")
	if err == nil || !strings.Contains(err.Error(), "example.com/fix: what changed since v0.1.0 calls for v0.2.0 at least, not v0.1.1") ||
		!strings.Contains(err.Error(), "Hello: removed") {
		t.Fatalf("a patch release that removes Hello: %v", err)
	}
	if after := f.state(); after != before {
		t.Errorf("a refused release changed the repository:\nbefore %q\nafter  %q", before, after)
	}
	if out, err = f.release("v0.2.0"); err != nil {
		t.Fatalf("the minor release: %v", err)
	}
	for _, want := range []string{"example.com/fix: compatible with v0.1.0 as v0.2.0", "example.com/fix/cloud/x: compatible with v0.1.0 as v0.2.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the minor release printed %q, want %q", out, want)
		}
	}
}

// prose keeps a heading after a code block or a comment ends, and hides
// one inside: the fence closes only with its own character, at least as
// long, and a comment may end on the line it starts.
func TestProse(t *testing.T) {
	for _, tc := range []struct{ md, want string }{
		{"```\n## [1.0.0] - x\n```\n## [0.9.0] - x\n", "0.9.0"},
		{"````\n```\n## [1.0.0] - x\n````\n## [0.9.0] - x\n", "0.9.0"},
		{"~~~\n```\n## [1.0.0] - x\n~~~\n## [0.9.0] - x\n", "0.9.0"},
		{"<!-- a --> text <!--\n## [1.0.0] - x\n-->\n## [0.9.0] - x\n", "0.9.0"},
		{"<!-- never ends\n## [1.0.0] - x\n", ""},
		{"    ```\n## [1.0.0] - x\n", "1.0.0"}, // an indented code line opens no block
	} {
		var got []string
		for _, m := range changelogSection.FindAllSubmatch(prose([]byte(tc.md)), -1) {
			got = append(got, string(m[1]))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("sections of %q: %q, want %q", tc.md, got, tc.want)
		}
	}
}
